// The state behind a raw_socket: the backend, the waiters on its descriptors (the library's
// fd_waiter) and timers, the outstanding operations (at most one of each kind), the flow
// slots and the lending accounts. Shared with the batches it lends, so their buffers stay
// valid after the socket closes; every timer's handler holds it too, so it outlives its
// pending timers (a pending descriptor wait is withdrawn when its waiter goes, at close()).
#pragma once

#include "async/fd_waiter.hpp"
#include "raw/backend.hpp"
#include "raw/interface_info.hpp"
#include "raw/multicast_groups.hpp"

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace asio_rdma::detail {

/// One outstanding operation of a raw socket: its handler, and the work it keeps alive on the
/// handler's executor while it waits (the socket's descriptor waits come and go).
template <typename Signature> struct raw_operation {
  pending_operation<Signature> handler;
  boost::asio::any_completion_executor work;
  std::uint64_t generation = 0;
  bool active = false;
  bool cancel_requested = false;
};

class raw_socket_core : public std::enable_shared_from_this<raw_socket_core> {
public:
  raw_socket_core(boost::asio::any_io_executor ex, interface_info interface,
                  std::unique_ptr<backend> backend, std::unique_ptr<multicast_groups> groups);
  ~raw_socket_core();
  raw_socket_core(const raw_socket_core&) = delete;
  raw_socket_core& operator=(const raw_socket_core&) = delete;

  /// Makes the waiters on the backend's descriptors.
  error_code register_descriptors();

  const raw_caps& caps() const noexcept { return backend_->caps(); }
  raw_statistics statistics() noexcept { return backend_->statistics(); }
  const interface_info& interface() const noexcept { return interface_; }
  std::size_t lent() const noexcept { return lent_received_ + lent_send_; }
  bool is_open() const noexcept { return !closed_; }

  void close() noexcept;
  void cancel() noexcept;

  // Flow slots.
  flow_handle add_flow(const flow_rule& rule, error_code& ec);
  std::uint64_t set_flow(std::size_t index, const flow_rule& rule, error_code& ec);
  void clear_flow(std::size_t index, error_code& ec) noexcept;
  bool owns_flow(std::size_t index, std::uint64_t generation) const noexcept;

  // Operations (called from raw_socket's initiating functions).
  void start_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                     raw_receive_operation&& pending);
  void start_acquire(std::size_t n, raw_acquire_operation&& pending);
  void start_send(send_batch batch, raw_send_operation&& pending);
  void start_flush(raw_send_operation&& pending);

  // Lending (called by the batches).
  void release_received(std::vector<received_packet>& packets) noexcept;
  void return_send_buffers(std::span<const send_packet> packets) noexcept;

private:
  enum class operation_kind { receive, acquire, send, flush };

  template <typename Signature>
  void begin(raw_operation<Signature>& op, pending_operation<Signature>&& pending,
             operation_kind kind);
  template <typename Signature, typename... Args>
  void finish(raw_operation<Signature>& op, from origin, Args&&... args);
  void request_cancel(operation_kind kind) noexcept;

  /// The interest a receive or the send side holds in a waiter, while it waits on a
  /// descriptor. (A wait has no generation: the interest is withdrawn when the operation
  /// finishes, and a waiter calls back only while interest is held.)
  struct fd_interest {
    fd_waiter* waiter = nullptr;
    fd_waiter::direction direction = fd_waiter::read;
    bool is(const fd_waiter* w, fd_waiter::direction d) const noexcept {
      return waiter == w && direction == d;
    }
  };
  fd_waiter* waiter_for(int fd) noexcept;
  void wait(const wait_plan& plan, fd_interest& interest, boost::asio::steady_timer& timer,
            void (raw_socket_core::*on_ready)(std::uint64_t, bool, error_code),
            std::uint64_t generation);
  static void withdraw(fd_interest& interest) noexcept;
  /// A waiter's callback: waiter `Send` (false: the one on receive_fd) is ready in direction D.
  template <bool Send, fd_waiter::direction D> static void on_fd_ready(void* self);

  void receive_step(std::uint64_t generation);
  void on_receive_wait(std::uint64_t generation, bool from_fd, error_code ec);
  void on_receive_deadline(std::uint64_t generation, error_code ec);
  void finish_receive(error_code ec, std::size_t n, from origin = from::completion_path);

  void tx_step();
  void on_tx_wait(std::uint64_t, bool from_fd, error_code ec);
  void finish_acquire(error_code ec, std::size_t n, from origin = from::completion_path);
  void finish_send(error_code ec, from origin = from::completion_path);
  void finish_flush(error_code ec, from origin = from::completion_path);
  void fail_tx(error_code ec);

  boost::asio::any_io_executor executor_;
  interface_info interface_;
  std::unique_ptr<multicast_groups> groups_;
  std::unique_ptr<backend> backend_;
  // One waiter per descriptor: the packet backend waits on one fd in both directions (for
  // receives, readable; for sends, writable), the verbs backend on two completion channels.
  std::optional<fd_waiter> receive_waiter_;
  std::optional<fd_waiter> send_waiter_; // when send_fd() is not receive_fd()
  fd_interest receive_interest_;
  fd_interest tx_interest_;
  // Timer plans and a receive's timeout are not descriptor waits: Asio timers.
  boost::asio::steady_timer receive_deadline_;
  boost::asio::steady_timer receive_timer_;
  boost::asio::steady_timer tx_timer_;
  bool closed_ = false;

  raw_operation<void(error_code, receive_batch)> receive_;
  std::size_t receive_max_ = 0;
  bool receive_poll_only_ = false;
  bool receive_has_deadline_ = false;
  bool receive_deadline_armed_ = false;
  bool receive_waiting_ = false; // a descriptor or poll-timer wait is pending
  std::chrono::steady_clock::time_point receive_deadline_time_;
  std::vector<received_packet> receive_storage_; // recycled through the batches

  raw_operation<void(error_code, send_batch)> acquire_;
  std::size_t acquire_count_ = 0;
  std::vector<send_packet> acquire_storage_; // recycled through the batches
  raw_operation<void(error_code)> send_;
  std::vector<send_packet> send_packets_;
  std::size_t send_next_ = 0;
  raw_operation<void(error_code)> flush_;
  bool tx_waiting_ = false;
  error_code tx_error_; // a failed send completion, for the next send or flush

  std::size_t lent_received_ = 0;
  std::size_t lent_send_ = 0;

  struct flow_slot {
    std::optional<flow_rule> rule;
    std::uint64_t generation = 0;
  };
  std::vector<flow_slot> slots_;
};

} // namespace asio_rdma::detail
