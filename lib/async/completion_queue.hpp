// A completion queue and its completion channel, waited on by the io_context.
#pragma once

#include "verbs/completion.hpp"
#include "async/fd_waiter.hpp"
#include "verbs/handles.hpp"

#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <memory>

namespace asio_rdma::detail {

class completion_queue : public std::enable_shared_from_this<completion_queue> {
public:
  static std::shared_ptr<completion_queue> create(const asio::any_io_executor& ex,
                                                  ibv_context* device, int entries, error_code& ec);

  completion_queue(const asio::any_io_executor& ex, comp_channel_ptr channel, event_counted_cq cq);
  ~completion_queue();
  completion_queue(const completion_queue&) = delete;
  completion_queue& operator=(const completion_queue&) = delete;

  ibv_cq* native() const { return cq_.get(); }

  /// Arms the CQ. Completion events are waited for while some user
  /// operation declared interest; completions meanwhile stay in the CQ.
  error_code arm();
  /// Stops waiting for good and forgets the owner's after-batch callback;
  /// completions still in the queue are not dispatched.
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

  /// Attaches the queue to its owner, once, before start(): the object that owns every
  /// work request's target (the connection, the shared queues, the datagram socket) and
  /// this queue (holding the owner is how a wake-up keeps the queue alive), and
  /// `after_batch`, called once after each drained batch (e.g. to ring a doorbell for work
  /// that the completions made possible). The owner is kept alive while a batch is
  /// dispatched: a handler run from the batch may drop the last user reference to it, and
  /// later completions in the same batch still point into it. Completions of an owner
  /// that is gone are not dispatched.
  void attach(std::weak_ptr<void> owner, callback after_batch = {}) {
    owner_ = std::move(owner);
    after_batch_ = after_batch;
  }

  /// Polls until the queue is empty, dispatching every completion; returns
  /// how many. Safe to call from a completion handler (re-entrant calls
  /// return 0 at once). For callers outside the completion path (an initiating
  /// function, close()): the completions it finds are dispatched as from::user_call, so
  /// their handlers are posted, never run inside that call (Asio runs no handler inside
  /// an initiating function). From the fd wait and the busy-poll loop (the completion
  /// path) they are dispatched as from::completion_path.
  int poll();

  /// True while completions are being dispatched (a handler runs inside a poll).
  bool polling() const { return polling_; }
  /// Where the latest batch was dispatched from: for the owner's after-batch callback,
  /// whose own completions (posting more work) must come from the same place.
  from batch_origin() const { return batch_origin_; }

private:
  static void on_readable(void* self) { static_cast<completion_queue*>(self)->drain_events(); }
  void drain_events();
  /// poll() for a caller that already keeps this queue and its owner alive; each
  /// completion is dispatched as found from `origin`.
  int poll_unguarded(from origin);
  void listen_to_channel(bool on);
  void schedule_spin();
  void spin();

  static constexpr int batch_size = 32;
  // Polls per busy-poll turn (fewer if a batch was dispatched) before other
  // handlers get to run.
  static constexpr int spin_polls = 256;

  asio::any_io_executor ex_;
  comp_channel_ptr channel_;
  event_counted_cq cq_; // declared after channel_: destroyed before it
  fd_waiter waiter_;
  callback after_batch_;
  std::weak_ptr<void> owner_;
  bool polling_ = false;
  from batch_origin_ = from::completion_path;
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
