// The interface between raw_socket_core (asynchronous operations, flow slots, lending) and the
// two backends (packet_backend, verbs_backend). Backends never block and never wait: they say
// how the core should wait (wait_plan) and the core waits through Asio.
#pragma once

#include <asio_rdma/raw_socket.hpp>

#include <chrono>
#include <span>

namespace asio_rdma::detail {

/// The backends' way to the buffer a packet lends, which users can read but not change.
struct raw_packet_access {
  static std::uint32_t id(const received_packet& p) noexcept { return p.buffer_id_; }
  static void set_id(received_packet& p, std::uint32_t id) noexcept { p.buffer_id_ = id; }
  static std::uint32_t id(const send_packet& p) noexcept { return p.buffer_id_; }
  /// A fresh send packet lending buffer `id` at `buffer`.
  static send_packet lend(std::span<std::byte> buffer, std::uint32_t id) noexcept {
    send_packet p;
    p.buffer_ = buffer;
    p.buffer_id_ = id;
    return p;
  }
};

/// How to wait before calling the backend again.
struct wait_plan {
  enum kind_type {
    /// Nothing to wait for now (something else, like the user returning buffers, must happen).
    none,
    /// Call again at once: the state may have changed while arming.
    retry,
    /// Wait until `fd` is readable.
    readable,
    /// Wait until `fd` is writable.
    writable,
    /// Wait for `period`, then call again.
    timer,
  };
  kind_type kind = none;
  int fd = -1;
  std::chrono::nanoseconds period{};
};

class backend {
public:
  virtual ~backend() = default;

  virtual const raw_caps& caps() const noexcept = 0;
  virtual raw_statistics statistics() noexcept = 0;

  /// The file descriptors the core will wait on (each registered once with the reactor;
  /// the packet backend uses one fd for both).
  virtual int receive_fd() const noexcept = 0;
  virtual int send_fd() const noexcept = 0;

  // --- receive ---
  /// Fills out[0..n) with ready packets, lending their buffers; returns n (0: none ready).
  virtual std::size_t poll_receive(std::span<received_packet> out, error_code& ec) noexcept = 0;
  /// How to wait for more packets (may arm a completion notification).
  virtual wait_plan receive_wait_plan(error_code& ec) noexcept = 0;
  /// Consumes the readiness event after receive_fd was readable.
  virtual void on_receive_ready() noexcept = 0;
  /// Returns lent buffers.
  virtual void release(std::span<const received_packet> packets) noexcept = 0;

  // --- send ---
  /// Lends up to out.size() free send buffers; returns how many.
  virtual std::size_t acquire(std::span<send_packet> out) noexcept = 0;
  /// Returns lent send buffers unsent.
  virtual void give_back(std::span<const send_packet> packets) noexcept = 0;
  /// Posts packets in order; returns how many were taken (the rest must be retried after
  /// waiting on send_wait_plan); sets ec on a hard failure.
  virtual std::size_t post(std::span<const send_packet> packets, error_code& ec) noexcept = 0;
  /// Reaps send completions; returns true when nothing posted is still in flight.
  virtual bool poll_sent(error_code& ec) noexcept = 0;
  /// How to wait for send progress: `blocked` when post() took less than asked, `flushing` when
  /// a flush waits for poll_sent().
  virtual wait_plan send_wait_plan(bool blocked, bool flushing, error_code& ec) noexcept = 0;
  /// Consumes the readiness event after a send wait on send_fd.
  virtual void on_send_ready() noexcept = 0;

  // --- flows (rules are normalized) ---
  virtual error_code set_flow(std::size_t index, const flow_rule& rule) noexcept = 0;
  virtual error_code clear_flow(std::size_t index) noexcept = 0;

  /// Stops all I/O: removes flows, closes descriptors and queues. Lent buffer memory stays
  /// valid (it is freed with the backend); release() and give_back() remain callable.
  virtual void shutdown() noexcept = 0;
};

} // namespace asio_rdma::detail
