// A completion queue and its completion channel, waited on by the io_context.
#pragma once

#include "completion.hpp"
#include "handles.hpp"

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

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

  /// Arms the CQ and starts waiting for completion events.
  error_code start();
  /// Stops waiting; completions still in the queue are not dispatched.
  void stop();

  void set_batch_listener(batch_listener listener) { listener_ = listener; }

  /// Polls until the queue is empty, dispatching every completion. Safe to
  /// call from a completion handler (re-entrant calls return at once).
  void poll();

private:
  void wait();
  void on_readable();

  static constexpr int batch_size = 32;
  // Acknowledging costs a mutex inside libibverbs: do it in batches, and
  // always before destroying the CQ.
  static constexpr unsigned ack_batch = 64;

  asio::any_io_executor ex_;
  comp_channel_ptr channel_;
  cq_ptr cq_;
  asio::posix::stream_descriptor descriptor_;
  batch_listener listener_;
  unsigned unacked_events_ = 0;
  bool polling_ = false;
  bool stopped_ = false;
};

} // namespace asio_rdma::detail
