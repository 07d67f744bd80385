// Bulk payloads over RDMA (docs/rpc.md, "Bulk"): a request or reply of at least its
// sender's bulk_threshold is not copied through the stream. The sender registers the
// bytes for the peer to read and sends their descriptor (remote_buffer's encoding) in the
// frame; the receiver RDMA-reads them straight into their destination.
//
// Registration is per payload, never cached: a cache of a user's registrations would go
// stale when the user's memory is unmapped and mapped again at the same address. Memory
// the caller registered itself (call_options::request_memory, reply_memory) is advertised
// as it is: its lifetime is the caller's to keep.
#pragma once

#include "rpc/transport.hpp"

#include <asio_rdma/connection.hpp>
#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <boost/asio/buffer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace asio_rdma::rpc::detail {

using descriptor_bytes = std::array<std::byte, remote_buffer::encoded_size>;

/// The peer's descriptor of a bulk payload, if it is well formed and its length is 1 ..
/// `most` bytes.
inline std::optional<remote_buffer> parse_descriptor(const descriptor_bytes& bytes,
                                                     std::uint64_t most) noexcept {
  error_code bad;
  const remote_buffer b = remote_buffer::decode(bytes, bad);
  if (bad || b.length == 0 || b.length > most)
    return std::nullopt;
  return b;
}

/// What a pull's completion finds its call by: the connection (kept alive by it) and the
/// call's id.
template <typename Connection> struct pull_owner {
  std::shared_ptr<Connection> self;
  std::uint64_t id;
};

/// Memory registered for the peer to RDMA-read (a bulk payload) or RDMA-write (a reply
/// buffer), and its descriptor. Its memory is pinned while the object lives, so a read
/// or write of it never touches memory the owner freed.
class exposed_payload {
public:
  /// What the peer may do with the memory. (Not told by the buffer's type: asio::buffer
  /// of a vector is mutable whatever the intent.)
  enum class peer_may { read, write };

  /// Registers `bytes` (not empty) with the device of `conn` for the peer to read only
  /// (it cannot write them), or to write into; `ec` says why not.
  exposed_payload(const connection& conn, boost::asio::const_buffer bytes, peer_may what,
                  error_code& ec);
  /// As above, advertised from `callers` (memory the caller registered, call_options'
  /// request_memory or reply_memory) when it is on the protection domain of `conn`:
  /// nothing is registered then, and `ec` is errc::out_of_bounds if `bytes` are not inside
  /// it, asio::error::invalid_argument if it lacks the access `what` needs. On another
  /// protection domain (or null) `bytes` are registered as above.
  exposed_payload(const connection& conn, boost::asio::const_buffer bytes, peer_may what,
                  const memory_region* callers, error_code& ec);

  const descriptor_bytes& descriptor() const noexcept { return descriptor_; }
  /// True if the descriptor names memory the caller registered (and may reuse once its
  /// call has completed), not a registration of this object's.
  bool in_callers_memory() const noexcept { return !region_.is_registered(); }

private:
  memory_region region_;
  descriptor_bytes descriptor_{};
};

/// Registered memory of the library's own that bulk payloads are read into, allocated
/// and registered once and reused for payloads up to its capacity: a fresh buffer and its
/// registration per payload cost more than the transfer on a software device.
class bulk_buffer {
public:
  /// `capacity` bytes (not 0), registered on the device of `conn`; `ec` says why not.
  bulk_buffer(const connection& conn, std::size_t capacity, error_code& ec);

  std::size_t capacity() const noexcept { return region_.size(); }
  /// Its first `n` bytes (n <= capacity()).
  std::span<std::byte> bytes(std::size_t n) const noexcept { return region_.data().first(n); }
  /// The same as a local_buffer to read into.
  local_buffer slice(std::size_t n) const noexcept { return region_.slice(0, n); }

private:
  memory_region region_;
};

/// rpc::client's and call_context's register_memory: `bytes` registered on the device of
/// `rdma`, or errc::operation_not_supported when the transport is TCP (`rdma` null).
memory_region register_for_bulk(asio_rdma::connection* rdma, std::span<std::byte> bytes,
                                access flags, error_code& ec);

/// `data`'s `size` bytes as a slice of `holding`, memory the user registered, for a
/// transfer over `conn`: nullopt when `holding` is null or on another protection domain
/// (the caller then registers the bytes itself), or, with `ec` set, errc::out_of_bounds
/// when the bytes are not inside it and asio::error::invalid_argument when it lacks
/// `needs`.
std::optional<local_buffer> registered_slice(const connection& conn, const memory_region* holding,
                                             const void* data, std::size_t size, access needs,
                                             error_code& ec) noexcept;

/// RDMA-reads the peer's `from` (`n` bytes, not 0) into `into`, registered memory that
/// lives until `done` is called: reads it in pieces, then calls `done` with the first
/// error, if any, and the bytes read; never inside this call.
void pull(connection& conn, const bulk_buffer& into, std::size_t n, const remote_buffer& from,
          io_done done);

/// RDMA-writes `from` (not empty) into the peer's `to` (as long) over `conn`: registers
/// `from` for the write, writes it in pieces, then calls `done` as pull() does. `from`
/// must live until then.
void push(connection& conn, boost::asio::const_buffer from, const remote_buffer& to,
          io_done done);

/// RDMA-reads the peer's `from` (`into.size()` bytes, not 0) into `into` over `conn`:
/// registers `into` for the read (local and remote write: iWARP's read response is a
/// write into it), reads it in pieces, then calls `done` with the first error, if any,
/// and the bytes read; never inside this call. `into` must live until then.
void pull(connection& conn, std::span<std::byte> into, const remote_buffer& from, io_done done);

/// As pull() and push() above, from or into memory the user registered (`holding`, as
/// registered_slice() takes it, with local and remote write for a pull): nothing is
/// registered then. A `holding` that cannot serve completes `done` with its error, posted.
void pull(connection& conn, std::span<std::byte> into, const memory_region* holding,
          const remote_buffer& from, io_done done);
void push(connection& conn, boost::asio::const_buffer from, const memory_region* holding,
          const remote_buffer& to, io_done done);

} // namespace asio_rdma::rpc::detail
