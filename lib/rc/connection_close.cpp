// connection_impl: disconnect and close, draining posted work, teardown, and
// the io_context waits a pending operation needs (interest). What operations
// get once the connection is closed: close_reason.hpp.
#include "rc/connection_impl.hpp"

#include "rc/shared_queues_impl.hpp"

namespace asio_rdma::detail {

// ---------------------------------------------------------------- teardown

void start_disconnect(connection_impl* impl, pending_operation<void(error_code)>&& pending) {
  impl->disconnect(std::move(pending));
}

void connection_impl::disconnect(pending_operation<void(error_code)>&& pending) {
  if (state_ != state::open)
    return pending.complete(ex_, from::user_call, ending_.for_late_disconnect());
  disconnect_handler_ = std::move(pending);
  ending_.disconnect_requested();
  op_started();
  disconnect_handler_.on_cancel(
      [this](asio::cancellation_type) { complete_disconnect(asio::error::operation_aborted); });
  arm_timeout(true);
  begin_close({});
}

void connection_impl::complete_disconnect(error_code ec) {
  if (!disconnect_handler_)
    return;
  timer_.cancel();
  op_finished();
  auto handler = std::move(disconnect_handler_);
  // Posted even from the event path: it is reached from inside close's own steps, which
  // the handler (destroying the connection) must not interrupt.
  handler.complete(ex_, from::user_call, ec);
}

void connection_impl::close() noexcept {
  if (state_ == state::closed)
    return;
  if (establish_handler_)
    return fail_establishment(asio::error::operation_aborted, from::user_call);
  ending_.closed_locally();
  if (state_ == state::closing) {
    fail_waiting_receives(from::user_call);
    return;
  }
  begin_close({});
}

void connection_impl::queue_pair_failed() {
  // A flush while open: the queue pair went to the error state without us. The peer's
  // disconnect does that too, and its CM event (an orderly end: eof) may still be on its
  // way; if none has come after a grace period, the peer ended the connection abruptly
  // (iWARP's TERMINATE after a remote error, which tells the writer nothing else).
  if (queue_pair_failed_)
    return;
  queue_pair_failed_ = true;
  call_after<&connection_impl::reset_if_still_open>(timer_, std::chrono::milliseconds(200));
}

void connection_impl::reset_if_still_open() {
  if (state_ == state::open)
    begin_close(asio::error::connection_reset);
}

void connection_impl::begin_close(error_code reason) {
  // The poll below runs handlers, and one may drop the user's last reference
  // (a coroutine that ends and destroys its connection): keep this object
  // alive until the close is done. Empty only when called from the destructor.
  const auto keep_alive = weak_from_this().lock();
  ending_.failed(reason);
  if (state_ == state::closing || state_ == state::closed) {
    fail_waiting_receives(from::user_call);
    return;
  }
  const bool was_connected = state_ == state::open;
  state_ = state::closing;
  keepalive_timer_.cancel();
  credit_timer_.cancel();
  sync_interest();
  // Sends completed when posted and not yet acknowledged would be flushed, and so lost,
  // by the disconnect: an orderly close of ours waits for them first (linger below). Not
  // once the peer has disconnected: its queue pair takes nothing more.
  const bool lingers = qp_created_ && was_connected && !reason && keep_alive &&
                       completed_unacknowledged_ > 0 && !ending_.peer_has_disconnected();
  // Work that was never posted completes now.
  while (operation* op = sends_.pop_queued())
    complete(op, ending_.for_withdrawn_work(), 0, from::user_call);
  if (lingers) {
    linger();
  } else if (qp_created_) {
    // Sends completed at post that the peer acknowledged, unsignalled, at the window's
    // end would never be reported, not even by the flush: a signalled probe behind them,
    // flushed in turn, takes them out of the window so that the close can finish.
    if (was_connected && keep_alive && sends_.silent_tail()) {
      queue_probe(size_operation([](error_code, std::size_t) {}, ex_));
      post_queued(from::user_call);
    }
    disconnect_queue_pair(was_connected);
  }
  // Messages that arrived before the error are delivered before end-of-stream.
  if (cq_)
    cq_->poll();
  fail_waiting_receives(from::user_call);
  if (state_ != state::closing)
    return; // a handler run by the poll finished the close
  if (!lingering_)
    bound_drain();
  maybe_finish_close();
}

void connection_impl::disconnect_queue_pair(bool was_connected) {
  // rdma_disconnect moves the queue pair to the error state (flushing all posted work)
  // and tells the peer; without a connection, or without rdma_cm (out of band: nobody to
  // tell), do it directly.
  if (out_of_band_ || !was_connected || ::rdma_disconnect(id_.get()) != 0) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ::ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
  }
}

void connection_impl::bound_drain() {
  if (sends_.outstanding() == 0 || shared_)
    return;
  // Posted sends have handlers waiting for their flush; bound that wait in case a device
  // never flushes.
  drain_timer_.expires_after(std::chrono::seconds(2));
  drain_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (!ec && self->state_ == state::closing)
      self->finish_close();
  });
}

void connection_impl::linger() {
  // A zero-length RDMA write, signalled (as keepalive's probe): RC completes in order, so
  // its completion says the peer acknowledged every send before it. It is counted as a
  // pending operation, so the io_context runs until it completes; 2 s at most.
  lingering_ = true;
  queue_probe(size_operation(
      [weak = weak_from_this()](error_code, std::size_t) {
        if (auto self = weak.lock())
          self->end_linger();
      },
      ex_));
  call_after<&connection_impl::end_linger>(drain_timer_, std::chrono::seconds(2));
}

void connection_impl::end_linger() {
  if (!lingering_)
    return;
  lingering_ = false;
  drain_timer_.cancel();
  if (state_ != state::closing || !qp_created_)
    return;
  disconnect_queue_pair(true);
  bound_drain();
  maybe_finish_close();
}

void connection_impl::finish_close() {
  drain_timer_.cancel();
  teardown();
  state_ = state::closed;
  reports_in_flight_ = 0; // withdrawn with the queue pair, as the sends below
  // Destroying the queue pair withdrew whatever the device had not flushed.
  while (operation* op = sends_.pop_posted()) {
    release_send_slot(op);
    complete(op, ending_.for_withdrawn_work(), 0, from::user_call);
  }
  fail_waiting_receives(from::user_call);
  if (shared_)
    sync_interest(); // the shared CQ: no longer waited on for this connection's flush
  // Out of band, no CM event follows: the flush was the whole disconnect.
  if (!ending_.disconnect_was_requested() || ending_.peer_has_disconnected() || out_of_band_)
    complete_disconnect({});
  auto keep = self_.release(); // may destroy *this when the caller returns
}

void connection_impl::teardown() {
  if (cq_ && !shared_)
    cq_->stop();
  if (qp_created_) {
    if (shared_)
      shared_->remove(qp_->qp_num);
    if (out_of_band_)
      ::ibv_destroy_qp(qp_);
    else
      ::rdma_destroy_qp(id_.get());
    qp_ = nullptr;
    qp_created_ = false;
  }
  if (shared_entries_ != 0) {
    shared_->unreserve(shared_entries_);
    shared_entries_ = 0;
  }
}

// ---------------------------------------------------------------- interest

void connection_impl::sync_interest() {
  ops_.updating(); // whatever was deferred is decided now
  // A close waits for the flush of what is posted (sends completed at post are no
  // pending operation, but their flush must be seen for the close to finish).
  const bool wanted = ops_.any() || (state_ == state::closing && sends_.outstanding() > 0);
  // An open connection must answer the peer's disconnect request (the CM
  // waits for our reply), so its CM events are always awaited (and an abandoned
  // handshake's, for the answer that ends it); completions
  // only while an operation needs them.
  const bool channel_wanted = wanted || state_ == state::open || state_ == state::abandoned;
  if (channel_ && channel_interest_ != channel_wanted) {
    channel_wanted ? channel_->add_interest() : channel_->remove_interest();
    channel_interest_ = channel_wanted;
  }
  if (cq_ && cq_interest_ != wanted) {
    wanted ? cq_->add_interest() : cq_->remove_interest();
    cq_interest_ = wanted;
  }
}

} // namespace asio_rdma::detail
