// The stream's messages on the wire (docs/stream.md, "On the wire"): a 32-bit control
// word, carried in the immediate data of an RDMA write / zero-length send where the
// device has immediate data, else as the 4-byte body of a send; and the ring
// advertisement each side sends first. A writer RDMA-writes its bytes into the reader's
// ring (kind data) or, on SoftRoCE, leaves some in its send buffer for the reader to
// RDMA-read (kind pull): docs/stream.md, "Who moves the bytes".
#pragma once

#include <boost/endian/conversion.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace asio_rdma::detail::stream_wire {

/// The control word: the type in the top 4 bits, a value in the other 28.
enum class kind : std::uint32_t {
  data = 0,          ///< `value` more bytes are in the receiver's ring
  credit = 1,        ///< the receiver read `value` more bytes: their place is free
  end = 2,           ///< the sender's data ends (async_shutdown); value 0
  advertisement = 3, ///< first message of each side: its ring (value: the version)
  pull = 4,          ///< `value` more bytes wait in the sender's send buffer: read them
  pulled = 5,        ///< the receiver read `value` more bytes left for it: their place is free
};
constexpr std::uint32_t value_bits = 28;
constexpr std::uint32_t value_mask = (std::uint32_t(1) << value_bits) - 1;
/// Version 2 adds the send buffer to the advertisement (pulls); version 1's is read too.
constexpr std::uint32_t version = 2;

/// The largest ring a side may advertise (and so the largest data or credit value).
constexpr std::size_t max_ring_size = std::size_t(64) << 20;
/// The smallest.
constexpr std::size_t min_ring_size = 4096;
/// The most bytes a writer leaves to be pulled at once: its RDMA writes and pulls in
/// flight together (stream_impl::max_posts). A reader refuses more.
constexpr std::size_t max_pulls = 4;

constexpr std::uint32_t word(kind k, std::uint32_t value) noexcept {
  return static_cast<std::uint32_t>(k) << value_bits | (value & value_mask);
}
constexpr kind kind_of(std::uint32_t w) noexcept { return static_cast<kind>(w >> value_bits); }
constexpr std::uint32_t value_of(std::uint32_t w) noexcept { return w & value_mask; }

/// A control word as a send's body (little-endian), for devices without immediate data.
constexpr std::size_t word_size = 4;
inline std::array<std::byte, word_size> encode_word(std::uint32_t w) noexcept {
  std::array<std::byte, word_size> out;
  boost::endian::store_little_u32(reinterpret_cast<unsigned char*>(out.data()), w);
  return out;
}
inline std::uint32_t decode_word(const std::byte* in) noexcept {
  return boost::endian::load_little_u32(reinterpret_cast<const unsigned char*>(in));
}

/// The advertisement: word(advertisement, version), the ring's size, address and rkey,
/// 4 zero bytes (24 bytes: version 1); version 2 goes on with the send buffer's size,
/// address and rkey (40 bytes). Little-endian. A send buffer of size 0: the side
/// never leaves bytes to be pulled.
struct advertisement {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint32_t ring_size = 0;
  std::uint64_t send_address = 0;
  std::uint32_t send_rkey = 0;
  std::uint32_t send_size = 0;
  std::uint32_t version = stream_wire::version; ///< as decoded: 1 knows no pulls
};
constexpr std::size_t advertisement_v1_size = 24;
constexpr std::size_t advertisement_size = 40;

inline std::array<std::byte, advertisement_size> encode(const advertisement& a) noexcept {
  std::array<std::byte, advertisement_size> out{};
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  boost::endian::store_little_u32(p, word(kind::advertisement, version));
  boost::endian::store_little_u32(p + 4, a.ring_size);
  boost::endian::store_little_u64(p + 8, a.address);
  boost::endian::store_little_u32(p + 16, a.rkey);
  boost::endian::store_little_u32(p + 24, a.send_size);
  boost::endian::store_little_u64(p + 28, a.send_address);
  boost::endian::store_little_u32(p + 36, a.send_rkey);
  return out;
}

/// The advertisement in `size` bytes, or nothing if they are not one this version
/// understands (wrong length, type, version, nonzero padding, or a ring or send buffer
/// size out of bounds).
inline std::optional<advertisement> decode_advertisement(const std::byte* in,
                                                         std::size_t size) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(in);
  const std::uint32_t v = size == advertisement_size      ? 2
                          : size == advertisement_v1_size ? 1
                                                          : 0;
  if (v == 0 || boost::endian::load_little_u32(p) != word(kind::advertisement, v) ||
      boost::endian::load_little_u32(p + 20) != 0)
    return std::nullopt;
  advertisement a;
  a.version = v;
  a.ring_size = boost::endian::load_little_u32(p + 4);
  a.address = boost::endian::load_little_u64(p + 8);
  a.rkey = boost::endian::load_little_u32(p + 16);
  if (a.ring_size < min_ring_size || a.ring_size > max_ring_size)
    return std::nullopt;
  if (v == 2) {
    a.send_size = boost::endian::load_little_u32(p + 24);
    a.send_address = boost::endian::load_little_u64(p + 28);
    a.send_rkey = boost::endian::load_little_u32(p + 36);
    if (a.send_size != 0 && (a.send_size < min_ring_size || a.send_size > max_ring_size))
      return std::nullopt;
  }
  return a;
}

/// What one of the peer's messages says.
struct message {
  enum class what : std::uint8_t { data, credit, end, advertisement, pull, pulled, malformed };
  what type = what::malformed;
  std::uint32_t value = 0;     ///< data, credit, pull, pulled: bytes
  advertisement advertised{};  ///< advertisement
};

/// Reads one of the peer's messages from how it arrived: its immediate data (if it had
/// any), whether it reports an RDMA write, its size and its body (the first `size` bytes
/// of `body`; only a 4-byte word or a 24- or 40-byte advertisement is read). Everything a stream
/// does not send is `malformed`: a send with both immediate data and a body, an RDMA write
/// announcing another length than it wrote or carrying a control word, a body of another
/// size, an end with a value, a credit, pull or pulled on an RDMA write or of 0 bytes, a
/// control word of an unknown kind or of kind advertisement (an advertisement is a body).
inline message parse(const std::optional<std::uint32_t>& immediate, bool rdma_write,
                     std::size_t size, const std::byte* body) noexcept {
  message m;
  std::uint32_t w = 0;
  if (immediate) {
    if (!rdma_write && size != 0)
      return m;
    w = *immediate;
  } else if (rdma_write) {
    return m; // an RDMA write the receiver hears of is always one with immediate data
  } else if (size == word_size) {
    w = decode_word(body);
  } else {
    if (auto a = decode_advertisement(body, size)) {
      m.type = message::what::advertisement;
      m.advertised = *a;
    }
    return m;
  }
  const std::uint32_t value = value_of(w);
  switch (kind_of(w)) {
  case kind::data:
    if (rdma_write && size != value)
      return m;
    m.type = message::what::data;
    m.value = value;
    return m;
  case kind::credit:
  case kind::pull:
  case kind::pulled:
    if (rdma_write || value == 0)
      return m;
    m.type = kind_of(w) == kind::credit ? message::what::credit
             : kind_of(w) == kind::pull ? message::what::pull
                                        : message::what::pulled;
    m.value = value;
    return m;
  case kind::end:
    if (rdma_write || value != 0)
      return m;
    m.type = message::what::end;
    return m;
  default:
    return m;
  }
}

} // namespace asio_rdma::detail::stream_wire
