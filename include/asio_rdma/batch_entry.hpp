// asio-rdma: one request of a batch (connection::async_batch).
#pragma once

#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <cstdint>
#include <optional>

namespace asio_rdma {

/// One request of connection::async_batch: a zero-copy send, an RDMA write
/// (optionally with immediate data) or an RDMA read of one registered local
/// buffer. Made with the named constructors; a value type (copied into the
/// library when the batch is initiated).
///
/// As for the single operations, the local memory is read (send, write) or
/// written (read) by the device until the batch completes.
class batch_entry {
public:
  /// What the request does on the wire.
  enum class kind : std::uint8_t { send, write, read };

  /// A message sent from registered memory (as connection::async_send(local_buffer)).
  static batch_entry send(const local_buffer& message) noexcept {
    return {kind::send, message, {}, std::nullopt};
  }
  /// The same, with 32-bit immediate data (host order) for the receiver.
  static batch_entry send_with_imm(const local_buffer& message, std::uint32_t immediate) noexcept {
    return {kind::send, message, {}, immediate};
  }
  /// An RDMA write of `source` into the peer's `destination` (as connection::async_write).
  static batch_entry write(const local_buffer& source, const remote_buffer& destination) noexcept {
    return {kind::write, source, destination, std::nullopt};
  }
  /// An RDMA write with immediate data: the peer's next receive reports it (as
  /// connection::async_write_with_imm).
  static batch_entry write_with_imm(const local_buffer& source, const remote_buffer& destination,
                                    std::uint32_t immediate) noexcept {
    return {kind::write, source, destination, immediate};
  }
  /// An RDMA read of the peer's `source` into `destination` (as connection::async_read).
  static batch_entry read(const local_buffer& destination, const remote_buffer& source) noexcept {
    return {kind::read, destination, source, std::nullopt};
  }

  /// What the request does.
  kind op() const noexcept { return op_; }
  /// The local buffer: sent or written from, or read into.
  const local_buffer& local() const noexcept { return local_; }
  /// The peer's memory written or read (empty for a send).
  const remote_buffer& remote() const noexcept { return remote_; }
  /// The immediate data, if any.
  std::optional<std::uint32_t> immediate() const noexcept { return immediate_; }

private:
  batch_entry(kind op, const local_buffer& local, const remote_buffer& remote,
              std::optional<std::uint32_t> immediate) noexcept
      : op_(op), local_(local), remote_(remote), immediate_(immediate) {}

  kind op_;
  local_buffer local_;
  remote_buffer remote_;
  std::optional<std::uint32_t> immediate_;
};

} // namespace asio_rdma
