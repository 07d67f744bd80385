// asio-rdma: one completion queue and one shared receive queue for many
// connections (servers with many clients).
#pragma once

#include <asio_rdma/completion_mode.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace asio_rdma {

namespace detail {
class shared_queues_impl;
struct internal_access;
} // namespace detail

/// Sizes of a shared_queues.
struct shared_queue_options {
  /// Receive buffers in the shared receive queue, for all its connections.
  std::uint32_t receive_queue_depth = 512;
  /// Size of each shared receive buffer: the largest message any of the
  /// connections can receive.
  std::size_t max_message_size = 64 * 1024;
  /// Entries the shared completion queue starts with. The shared receive queue
  /// takes receive_queue_depth of them, and each connection its send queue's
  /// entries while it is attached. When a connection's would not fit, the queue
  /// grows (doubles, up to the device's max_cqe) on devices that can resize a
  /// completion queue (rxe, mlx5). On devices that cannot (SoftiWARP), that
  /// connection's connect or accept fails with errc::device_limit_exceeded, whose
  /// message names the sizes; the queue never overflows. The default, 4096
  /// entries, takes 32 of the about 144 pages of queues SoftiWARP maps into a
  /// process (docs/devices.md) and holds 56 connections of the default depth.
  std::uint32_t completion_queue_size = 4096;
  /// How completions of the shared completion queue are noticed (see completion_mode).
  asio_rdma::completion_mode completion_mode = asio_rdma::completion_mode::event;
  /// completion_mode::adaptive: how long to poll before waiting for an event.
  std::chrono::microseconds adaptive_spin = std::chrono::microseconds(200);

  /// Names the first option out of range, or nullptr.
  const char* problem() const noexcept {
    if (receive_queue_depth == 0 || receive_queue_depth > 65536)
      return "receive_queue_depth must be 1..65536";
    if (max_message_size == 0 || max_message_size > (std::size_t(1) << 30))
      return "max_message_size must be 1 byte..1 GiB";
    if (completion_queue_size < receive_queue_depth)
      return "completion_queue_size must be at least receive_queue_depth";
    return nullptr;
  }
};

/// A completion queue and a shared receive queue (SRQ) that connections on
/// one device and one io_context can share, set through
/// connection_options::shared_queues (for an acceptor: in
/// acceptor_options::connection). Instead of one CQ, one fd wait and
/// receive_queue_depth buffers per connection, all of them share one CQ, one
/// fd and one pool of receive buffers.
///
/// A receive completion on the SRQ names its queue pair, so routing it to its
/// connection takes one lookup in an allocation-free hash table; sends and
/// one-sided operations complete exactly as without sharing. The objects are
/// created on the device of the first connection that uses them; a connection
/// on another device fails with errc::invalid_option. Copies refer to the same
/// queues, which live as long as a copy or a connection uses them.
class shared_queues {
public:
  /// No shared queues (each connection has its own).
  shared_queues() noexcept = default;
  /// Creates a shared completion queue and shared receive queue on the
  /// io_context of `ex`; throws boost::system::system_error.
  shared_queues(const boost::asio::any_io_executor& ex, const shared_queue_options& options = {});

  /// True if there are shared queues.
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  /// Connections currently using the queues.
  std::size_t connections() const noexcept;
  /// Entries of the shared completion queue now: the device's rounding of
  /// shared_queue_options::completion_queue_size, or more once it has grown; 0
  /// until the first connection creates the queues.
  std::size_t completion_queue_size() const noexcept;

private:
  friend struct detail::internal_access; // the library's way to impl_ (lib/internal_access.hpp)

  std::shared_ptr<detail::shared_queues_impl> impl_;
};

} // namespace asio_rdma
