// The RPC layer's frames (docs/rpc.md, "Wire"): a 24-byte header, then `length` bytes of
// payload. Sans-I/O: encoding and the checks of a peer's header, unit-tested and fuzzed
// without a connection.
//
//   offset size field
//        0    2 magic 0x52 0x50 ("RP")
//        2    1 kind (frame_kind)
//        3    1 flags: bulk (1) on a request or reply; reply buffer (2) on a request;
//                 written (4) on a reply; others refused
//        4    4 length of the payload
//        8    8 call id, never 0 (hello: the largest payload its sender takes)
//       16    4 word: request: method id; error: rpc::errc; hello: protocol version
//       20    4 request: deadline in ms from its arrival (0: none); hello: features
//
// All integers little-endian. A bulk frame's payload is a remote_buffer's encoding (24
// bytes): the sender's registered memory holding the request or reply, for the receiver
// to RDMA-read; a bulk reply's reader then sends a release frame. A request with a reply
// buffer ends with one more descriptor: the caller's buffer, for the handler to
// RDMA-write its reply into; a written reply then says so, with its length as its word
// and no payload.
#pragma once

#include <asio_rdma/remote_buffer.hpp>
#include <asio_rdma/rpc/error.hpp>

#include <boost/endian/conversion.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace asio_rdma::rpc::wire {

inline constexpr std::size_t header_size = 24;
inline constexpr std::uint32_t version = 2;
/// A request or reply whose payload is the descriptor of the bytes (remote_buffer).
inline constexpr std::uint8_t flag_bulk = 1;
/// A request whose payload ends with the descriptor of the caller's reply buffer.
inline constexpr std::uint8_t flag_reply_buffer = 2;
/// A reply written into that buffer already: word = its length, no payload.
inline constexpr std::uint8_t flag_written = 4;
/// A descriptor's size on the wire.
inline constexpr std::size_t descriptor_size = remote_buffer::encoded_size;
/// A hello's features: its sender reads bulk payloads by RDMA read (it is on RDMA).
inline constexpr std::uint32_t feature_bulk = 1;
/// The longest message an error frame may carry (a server cuts longer ones; a client
/// refuses a frame that claims more).
inline constexpr std::size_t max_error_message = 64 * 1024;
using header_bytes = std::array<std::byte, header_size>;

enum class frame_kind : std::uint8_t {
  /// Sent first by each side: word = version, call_id = the largest payload it takes.
  hello = 1,
  /// A call: word = method id, deadline_ms, payload = the request.
  request = 2,
  /// A successful call's reply: payload = the response.
  reply = 3,
  /// A failed call's reply: word = rpc::errc, payload = the server's message.
  error = 4,
  /// The client no longer waits for the call: its handler is cancelled. No payload.
  cancel = 5,
  /// The client has read a bulk reply: the server may release its memory. No payload.
  release = 6,
};

struct frame_header {
  frame_kind kind = frame_kind::hello;
  std::uint32_t length = 0;
  std::uint64_t call_id = 0;
  std::uint32_t word = 0;
  std::uint32_t deadline_ms = 0; // hello: features
  std::uint8_t flags = 0;
};

inline void encode(const frame_header& h, header_bytes& out) noexcept {
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  p[0] = 0x52;
  p[1] = 0x50;
  p[2] = static_cast<unsigned char>(h.kind);
  p[3] = h.flags;
  boost::endian::store_little_u32(p + 4, h.length);
  boost::endian::store_little_u64(p + 8, h.call_id);
  boost::endian::store_little_u32(p + 16, h.word);
  boost::endian::store_little_u32(p + 20, h.deadline_ms);
}

/// Sets an encoded frame's flags and payload length.
inline void set_payload(header_bytes& out, std::uint8_t flags, std::size_t length) noexcept {
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  p[3] = flags;
  boost::endian::store_little_u32(p + 4, static_cast<std::uint32_t>(length));
}

/// Whether a header's flags are known for its kind, with a payload that fits them.
inline bool flags_fit(const frame_header& h) noexcept {
  const std::size_t d = descriptor_size;
  switch (h.flags) {
  case 0:
    return true;
  case flag_bulk:
    return (h.kind == frame_kind::request || h.kind == frame_kind::reply) && h.length == d;
  case flag_reply_buffer:
    return h.kind == frame_kind::request && h.length >= d;
  case flag_bulk | flag_reply_buffer:
    return h.kind == frame_kind::request && h.length == 2 * d;
  case flag_written:
    return h.kind == frame_kind::reply && h.length == 0;
  default:
    return false;
  }
}

/// Reads a peer's header: errc::protocol_error unless the magic, the kind and the flags
/// are known (on a request: bulk, reply buffer or both, with room for their descriptors;
/// on a reply: bulk with a descriptor, or written with no payload), a cancel or release
/// carries no payload and the call id is not 0.
/// Lengths are the caller's to check against its limits.
inline boost::system::error_code parse(std::span<const std::byte, header_size> in,
                                       frame_header& h) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  if (p[0] != 0x52 || p[1] != 0x50)
    return make_error_code(errc::protocol_error);
  if (p[2] < static_cast<unsigned char>(frame_kind::hello) ||
      p[2] > static_cast<unsigned char>(frame_kind::release))
    return make_error_code(errc::protocol_error);
  h.kind = static_cast<frame_kind>(p[2]);
  h.length = boost::endian::load_little_u32(p + 4);
  h.call_id = boost::endian::load_little_u64(p + 8);
  h.word = boost::endian::load_little_u32(p + 16);
  h.deadline_ms = boost::endian::load_little_u32(p + 20);
  h.flags = p[3];
  if ((h.kind == frame_kind::cancel || h.kind == frame_kind::release) && h.length != 0)
    return make_error_code(errc::protocol_error);
  if (!flags_fit(h))
    return make_error_code(errc::protocol_error);
  if (h.call_id == 0)
    return make_error_code(errc::protocol_error);
  return {};
}

/// The error an error frame's word names, or protocol_error for a word that names none
/// (or names success).
inline boost::system::error_code error_of(std::uint32_t word) noexcept {
  if (word < static_cast<std::uint32_t>(errc::unknown_method) ||
      word > static_cast<std::uint32_t>(errc::decode_failed))
    return make_error_code(errc::protocol_error);
  return make_error_code(static_cast<errc>(word));
}

} // namespace asio_rdma::rpc::wire
