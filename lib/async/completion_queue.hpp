// A completion queue and its completion channel, waited on by the io_context.
#pragma once

#include "async/completion.hpp"
#include "async/fd_waiter.hpp"
#include "verbs/event_counted_cq.hpp"
#include "verbs/handles.hpp"

#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <memory>

namespace asio_rdma::detail {

class completion_queue : public std::enable_shared_from_this<completion_queue> {
public:
  /// Called once after each drained batch (e.g. to ring a doorbell for work
  /// that completions made possible). Plain function pointer + context.
  struct batch_listener {
    void (*after_batch)(void* context) = nullptr;
    void* context = nullptr;
  };

  static std::shared_ptr<completion_queue> create(const asio::any_io_executor& ex,
                                                  ibv_context* device, int entries, error_code& ec);

  completion_queue(const asio::any_io_executor& ex, comp_channel_ptr channel, event_counted_cq cq);
  ~completion_queue();
  completion_queue(const completion_queue&) = delete;
  completion_queue& operator=(const completion_queue&) = delete;

  ibv_cq* native() const { return cq_.get(); }

  /// Arms the CQ. Completion events are waited for while some user
  /// operation declared interest; completions meanwhile stay in the CQ.
  error_code start();
  /// Stops waiting for good; completions still in the queue are not dispatched.
  void stop();

  /// Chooses event waiting, busy polling or adaptive (see completion_mode).
  void set_mode(completion_mode mode, std::chrono::microseconds spin) {
    mode_ = mode;
    spin_ = spin;
  }

  /// While interest is declared (a user operation is pending), completions
  /// are noticed in the chosen mode; without, they wait in the CQ.
  void add_interest();
  void remove_interest();

  void set_batch_listener(batch_listener listener) { listener_ = listener; }

  /// The object that owns every work request's target (the connection). It is
  /// kept alive while a batch is dispatched: a handler run from the batch may
  /// drop the last user reference to it, and later completions in the same
  /// batch still point into it. Completions of an owner that is gone are not
  /// dispatched.
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  /// Polls until the queue is empty, dispatching every completion; returns
  /// how many. Safe to call from a completion handler (re-entrant calls
  /// return 0 at once).
  int poll();

  /// True while poll() dispatches completions (a handler runs inside it).
  bool polling() const { return polling_; }

private:
  static void on_readable(void* self) { static_cast<completion_queue*>(self)->drain_events(); }
  void drain_events();
  /// poll() for a caller that already keeps this queue and its owner alive.
  int poll_unguarded();
  void listen_to_channel(bool on);
  void schedule_spin();
  void spin();

  static constexpr int batch_size = 32;
  // Empty polls per busy-poll turn before other handlers get to run.
  static constexpr int spin_polls = 256;

  asio::any_io_executor ex_;
  comp_channel_ptr channel_;
  event_counted_cq cq_; // declared after channel_: destroyed before it
  fd_waiter waiter_;
  batch_listener listener_;
  std::weak_ptr<void> owner_;
  bool polling_ = false;
  bool stopped_ = false;
  completion_mode mode_ = completion_mode::event;
  std::chrono::microseconds spin_{0};
  int interest_ = 0;
  bool channel_interest_ = false;
  bool armed_ = false; // ibv_req_notify_cq called and no event consumed since
  bool spin_scheduled_ = false;
  std::chrono::steady_clock::time_point last_activity_{};
};

} // namespace asio_rdma::detail
