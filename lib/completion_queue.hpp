// A completion queue and its completion channel, waited on by the io_context.
#pragma once

#include "completion.hpp"
#include "fd_waiter.hpp"
#include "handles.hpp"

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>

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
                                                  ibv_context* device, int entries,
                                                  error_code& ec);

  completion_queue(const asio::any_io_executor& ex, comp_channel_ptr channel, cq_ptr cq);
  ~completion_queue();
  completion_queue(const completion_queue&) = delete;
  completion_queue& operator=(const completion_queue&) = delete;

  ibv_cq* native() const { return cq_.get(); }

  /// Arms the CQ. Completion events are waited for while some user
  /// operation declared interest; completions meanwhile stay in the CQ.
  error_code start();
  /// Stops waiting for good; completions still in the queue are not dispatched.
  void stop();

  void add_interest() { waiter_.add_interest(); }
  void remove_interest() { waiter_.remove_interest(); }

  void set_batch_listener(batch_listener listener) { listener_ = listener; }

  /// The object that owns every work request's target (the connection). It is
  /// kept alive while a batch is dispatched: a handler run from the batch may
  /// drop the last user reference to it, and later completions in the same
  /// batch still point into it. Completions of an owner that is gone are not
  /// dispatched.
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  /// Polls until the queue is empty, dispatching every completion. Safe to
  /// call from a completion handler (re-entrant calls return at once).
  void poll();

private:
  static void on_readable(void* self) { static_cast<completion_queue*>(self)->drain_events(); }
  void drain_events();

  static constexpr int batch_size = 32;
  // Acknowledging costs a mutex inside libibverbs: do it in batches, and
  // always before destroying the CQ.
  static constexpr unsigned ack_batch = 64;

  asio::any_io_executor ex_;
  comp_channel_ptr channel_;
  cq_ptr cq_;
  fd_waiter waiter_;
  batch_listener listener_;
  std::weak_ptr<void> owner_;
  unsigned unacked_events_ = 0;
  bool polling_ = false;
  bool stopped_ = false;
};

} // namespace asio_rdma::detail
