// asio-rdma: the wire format of the file transfer (version 3), as pure
// encode/decode functions. See docs/file_transfer.md for the message flow.
//
// Every control message is one RC send that starts with an 8-byte header:
//   magic   u32  0x52444654 ("RDFT")
//   version u8   3 (2 answered every file_begin with a status, numbered
//                   chunks per file and had no `credited` in a status; 1 had
//                   no resume)
//   type    u8   message_type
//   reserved u16 0
// followed by a fixed layout per type; integers are in network byte order and
// reserved fields must be zero. File data never travels in messages: it is
// RDMA-written into the receiver's advertised slots, with the chunk's sequence
// number as immediate data.
#pragma once

#include <asio_rdma/error.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

namespace asio_rdma::detail::file_protocol {

inline constexpr std::uint32_t magic = 0x52444654; // "RDFT"
inline constexpr std::uint8_t version = 3;
inline constexpr std::size_t header_size = 8;
/// Longest relative name on the wire (bytes, without terminator).
inline constexpr std::size_t max_name_length = 4096;
/// Longest control message (a file_begin with the longest name).
inline constexpr std::size_t max_message_size = 28 + max_name_length;

enum class message_type : std::uint8_t {
  hello = 1,        ///< sender -> receiver: offered chunk size and depth (16 bytes)
  hello_ack = 2,    ///< receiver -> sender: negotiated chunk size, slots, slot memory (40 bytes)
  file_begin = 3,   ///< sender -> receiver: a file or directory to create (28 bytes + name)
  file_end = 4,     ///< sender -> receiver: all data written; size and CRC-32C (24 bytes)
  credit = 5,       ///< receiver -> sender: the chunk with this sequence is on disk (16 bytes)
  status = 6,       ///< receiver -> sender: result of a file / directory (24 bytes)
  challenge = 7,    ///< receiver -> sender: a nonce to prove the shared secret on (40 bytes)
  proof = 8,        ///< sender -> receiver: HMAC-SHA256(secret, nonce) (40 bytes)
  resume_point = 9, ///< receiver -> sender: verified prefix of a resumable file (24 bytes)
  resume_from = 10, ///< sender -> receiver: the offset the data starts at (24 bytes)
};

/// file_begin flags.
inline constexpr std::uint8_t flag_resume = 1; ///< keep an interrupted file; offer its prefix

/// Bytes of a challenge's nonce and of a proof's HMAC-SHA256.
inline constexpr std::size_t nonce_size = 32;
inline constexpr std::size_t proof_size = 32;

enum class entry_kind : std::uint8_t { file = 1, directory = 2 };

/// Result codes of a status message. Unknown codes decode unchanged.
enum class status_code : std::uint16_t {
  ok = 0,
  bad_name = 1,               ///< absolute, "..", empty components, too long
  io_error = 2,               ///< the receiver could not create or write the file
  protocol_error = 3,         ///< the receiver did not understand the sender
  checksum_mismatch = 4,      ///< the data's CRC-32C differs from the sender's
  size_mismatch = 5,          ///< fewer or more bytes arrived than announced
  stopped = 6,                ///< the receiver is shutting down
  file_exists = 7,            ///< the name exists and the receiver's policy refuses to replace it
  too_large = 8,              ///< the file exceeds the receiver's maximum file size
  no_space = 9,               ///< not enough free space on the receiver (before or while writing)
  authentication_failed = 10, ///< missing or wrong proof of the shared secret
  too_many_requests = 11,     ///< per-peer limit reached (connections or files in flight)
  store_failed = 12,          ///< the verified file could not be committed (fsync, link, rename)
};

struct hello {
  std::uint32_t chunk_size = 0; ///< the sender's buffer size
  std::uint16_t depth = 0;      ///< chunks the sender wants in flight
  friend bool operator==(const hello&, const hello&) = default;
};

struct hello_ack {
  std::uint32_t chunk_size = 0; ///< min(sender's, receiver's buffer size)
  std::uint16_t slots = 0;      ///< chunks in flight, each in its own slot
  remote_buffer buffer;         ///< slots * chunk_size bytes, remote-writable
  friend bool operator==(const hello_ack&, const hello_ack&) = default;
};

struct file_begin {
  std::uint32_t file_id = 0; ///< counts entries within one transfer
  entry_kind kind = entry_kind::file;
  std::uint32_t mode = 0; ///< permission bits (07777 at most)
  std::uint64_t size = 0; ///< bytes that follow (0 for directories)
  std::string_view name;  ///< relative, '/'-separated (views the decoded bytes)
  std::uint8_t flags = 0; ///< flag_resume (files only); other bits must be zero
  friend bool operator==(const file_begin&, const file_begin&) = default;
};

struct file_end {
  std::uint32_t file_id = 0;
  std::uint32_t crc32c = 0;
  std::uint64_t size = 0;
  friend bool operator==(const file_end&, const file_end&) = default;
};

/// Chunk `sequence` (counted over the transfer, from 0 after the hello_ack,
/// mod 2^32) is on disk: its slot may be written again.
struct credit {
  std::uint32_t sequence = 0;
  friend bool operator==(const credit&, const credit&) = default;
};

/// The verdict on an entry: after a file's file_end (ok or not), after a
/// directory's file_begin, or a refusal of a file_begin. A receiver answers
/// entries in order, and an ok file_begin of a file gets no status at all.
struct status {
  std::uint32_t file_id = 0;
  status_code code = status_code::ok;
  /// Chunks of this transfer credited so far, counting this status (mod
  /// 2^32): the credits of the file's last chunks travel in its status.
  std::uint32_t credited = 0;
  friend bool operator==(const status&, const status&) = default;
};

struct challenge {
  std::array<std::byte, nonce_size> nonce{};
  friend bool operator==(const challenge&, const challenge&) = default;
};

struct proof {
  std::array<std::byte, proof_size> mac{};
  friend bool operator==(const proof&, const proof&) = default;
};

/// The answer to a file_begin with flag_resume (instead of an ok status):
/// the receiver holds the first `offset` bytes of this file from an earlier,
/// interrupted transfer, and `crc32c` is their CRC-32C (0 and 0: nothing).
struct resume_point {
  std::uint32_t file_id = 0;
  std::uint32_t crc32c = 0;
  std::uint64_t offset = 0;
  friend bool operator==(const resume_point&, const resume_point&) = default;
};

/// The sender's decision on a resume_point: `offset` is the receiver's
/// offset (its prefix matches the sender's file) or 0 (start over). Chunk
/// `seq` then carries the bytes from offset + seq * chunk_size.
struct resume_from {
  std::uint32_t file_id = 0;
  std::uint64_t offset = 0;
  friend bool operator==(const resume_from&, const resume_from&) = default;
};

using message = std::variant<std::monostate, hello, hello_ack, file_begin, file_end, credit, status,
                             challenge, proof, resume_point, resume_from>;

/// Encodes `m` into `out`; returns the number of bytes written, or 0 if `out`
/// is too small or the message cannot be encoded (a name longer than
/// max_name_length or empty).
std::size_t encode(const message& m, std::span<std::byte> out) noexcept;

/// Decodes one control message. errc::protocol_error (and monostate) for a
/// wrong magic, an unknown version or type, a length that does not match the
/// type, non-zero reserved fields, an unknown entry kind or a bad name length.
/// A file_begin's name views `in`.
message decode(std::span<const std::byte> in, error_code& ec) noexcept;

/// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data) noexcept;

} // namespace asio_rdma::detail::file_protocol
