// asio-rdma: the wire format of the file transfer (version 4), as pure
// encode/decode functions. See docs/file_transfer.md for the message flow.
//
// Every control message is one RC send that starts with an 8-byte header:
//   magic   u32  0x52444654 ("RDFT")
//   version u8   4 (3 had no file_batch; 2 answered every file_begin with a
//                   status, numbered chunks per file and had no `credited`
//                   in a status; 1 had no resume)
//   type    u8   message_type
//   reserved u16 0
// followed by a fixed layout per type; integers are in network byte order and
// reserved fields must be zero. File data travels RDMA-written into the
// receiver's advertised slots, with the chunk's sequence number as immediate
// data (on iWARP, which has none, followed by a chunk_written message), except
// that small files travel whole, many to a message, in a file_batch (when the
// receiver takes batches).
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
inline constexpr std::uint8_t version = 4;
inline constexpr std::size_t header_size = 8;
/// Longest relative name on the wire (bytes, without terminator).
inline constexpr std::size_t max_name_length = 4096;
/// Longest control message but a file_batch (a file_begin with the longest name).
inline constexpr std::size_t max_message_size = 28 + max_name_length;
/// A file_batch's bytes before its first record, and each record's before its name.
inline constexpr std::size_t batch_header_size = header_size + 8;
inline constexpr std::size_t record_header_size = 16;

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
  file_batch = 11,  ///< sender -> receiver: whole small files and directories (16 bytes + records)
  chunk_written = 12, ///< sender -> receiver: a chunk's plain RDMA write is done (16 bytes)
};

/// hello flags.
/// The sender tells of each chunk with a chunk_written message after its RDMA write,
/// not with the write's immediate data (iWARP has no immediate data).
inline constexpr std::uint16_t hello_chunk_notices = 1;

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
  std::uint16_t flags = 0;      ///< hello_chunk_notices; other bits must be zero
  friend bool operator==(const hello&, const hello&) = default;
};

struct hello_ack {
  std::uint32_t chunk_size = 0; ///< min(sender's, receiver's buffer size)
  std::uint16_t slots = 0;      ///< chunks in flight, each in its own slot
  remote_buffer buffer;         ///< slots * chunk_size bytes, remote-writable
  /// Largest file_batch the receiver takes, in bytes; 0: it takes none.
  std::uint32_t batch_limit = 0;
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

/// Chunk `sequence` (as a write with immediate data would carry it) of `length` bytes
/// is in its slot: the notice that follows a chunk's RDMA write when the transport has
/// no immediate data (RC places the write's bytes before this message arrives).
struct chunk_written {
  std::uint32_t sequence = 0;
  std::uint32_t length = 0;
  friend bool operator==(const chunk_written&, const chunk_written&) = default;
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

/// Whole entries in one message: each record is a file (with all its data and
/// its CRC-32C) or a directory, with file ids first_file_id, first_file_id + 1,
/// ... One status answers the batch: ok (with the last record's file id) once
/// every record is stored, or the refusal of the first record that failed
/// (the records before it are stored). Layout after the header:
///   first_file_id u32, count u16, reserved u16,
///   then `count` records: kind u8, flags u8 (0), name_length u16, mode u32,
///   size u32, crc32c u32, name, `size` bytes of data.
struct file_batch {
  std::uint32_t first_file_id = 0;
  std::uint16_t count = 0;              ///< records, 1 at least
  std::span<const std::byte> records{}; ///< views the decoded bytes (validated)
  friend bool operator==(const file_batch& a, const file_batch& b) noexcept {
    return a.first_file_id == b.first_file_id && a.count == b.count &&
           a.records.data() == b.records.data() && a.records.size() == b.records.size();
  }
};

/// One record of a file_batch.
struct batch_record {
  file_begin entry;                  ///< its file_id, kind, mode, size and name (flags 0)
  std::uint32_t crc32c = 0;          ///< of `data` (0 for a directory)
  std::span<const std::byte> data{}; ///< the whole file (empty for a directory)
};

/// Takes the record at the front of `records` (the rest stays in `records`);
/// false, with nothing taken, if it is malformed or truncated. `file_id` is
/// the record's (first_file_id + its index).
bool take_record(std::span<const std::byte>& records, std::uint32_t file_id,
                 batch_record& out) noexcept;

/// Builds a file_batch in a buffer, record by record: the sender fills each
/// record's data in place (read from its file), so nothing is copied twice.
class batch_builder {
public:
  /// An empty batch in `out` (batch_header_size bytes at least) whose first
  /// record will have `first_file_id`.
  batch_builder(std::span<std::byte> out, std::uint32_t first_file_id) noexcept;
  /// Bytes a record of this name and data size takes.
  static std::size_t record_size(std::size_t name_length, std::uint64_t size) noexcept {
    return record_header_size + name_length + size;
  }
  /// Whether a record of this name and size fits in what is left.
  bool fits(std::size_t name_length, std::uint64_t size) const noexcept;
  /// Appends a record (it must fit; the name 1..max_name_length bytes) and
  /// returns where its `size` data bytes go; set_crc() follows.
  std::span<std::byte> add(entry_kind kind, std::uint32_t mode, std::string_view name,
                           std::uint32_t size) noexcept;
  /// The CRC-32C of the last record's data.
  void set_crc(std::uint32_t crc) noexcept;
  std::uint16_t count() const noexcept { return count_; }
  std::uint32_t first_file_id() const noexcept { return first_; }
  /// Writes the header; returns the message's size in bytes.
  std::size_t finish() noexcept;

private:
  std::span<std::byte> out_;
  std::uint32_t first_;
  std::uint16_t count_ = 0;
  std::size_t used_ = batch_header_size;
  std::size_t last_crc_at_ = 0;
};

using message = std::variant<std::monostate, hello, hello_ack, file_begin, file_end, credit, status,
                             challenge, proof, resume_point, resume_from, file_batch,
                             chunk_written>;

/// Encodes `m` into `out`; returns the number of bytes written, or 0 if `out`
/// is too small or the message cannot be encoded (a name longer than
/// max_name_length or empty).
std::size_t encode(const message& m, std::span<std::byte> out) noexcept;

/// Decodes one control message. errc::protocol_error (and monostate) for a
/// wrong magic, an unknown version or type, a length that does not match the
/// type, non-zero reserved fields, an unknown entry kind or a bad name length,
/// a file_batch with no record or a malformed one. A file_begin's name and a
/// file_batch's records view `in`. (A file_batch is built with batch_builder,
/// not encode().)
message decode(std::span<const std::byte> in, error_code& ec) noexcept;

/// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data) noexcept;

} // namespace asio_rdma::detail::file_protocol
