// connection_impl: the send side of the data path (sends, one-sided work and
// atomics): initiation, posting in chained batches with selective
// signalling, send completions, and completing an operation's handler.
#include "rc/connection_impl.hpp"

#include "rc/shared_queues_impl.hpp"
#include "trace.hpp"
#include "verbs/verbs_error.hpp"

#include <arpa/inet.h>
#include <cstring>

namespace asio_rdma::detail {

// ---------------------------------------------------------------- entry points

void start_send(connection_impl* impl, const buffer_view<asio::const_buffer>& buffers,
                std::optional<std::uint32_t> immediate, size_operation&& pending) {
  impl->send(buffers, immediate, std::move(pending));
}

void start_work(connection_impl* impl, const work_request& request, size_operation&& pending) {
  impl->work(request, std::move(pending));
}

// ---------------------------------------------------------------- data path

void connection_impl::send(const buffer_view<asio::const_buffer>& buffers,
                           std::optional<std::uint32_t> immediate, size_operation&& pending) {
  error_code ec;
  if (buffers.too_many)
    ec = asio::error::invalid_argument;
  else if (buffers.total_size > options_.max_message_size)
    ec = errc::message_too_large;
  else if (state_ != state::open)
    ec = ending_.for_new_work();
  else if (immediate && !device_->has_immediate_data())
    ec = device_->no_immediate_data; // iWARP: refused before anything is posted
  operation* op = new_op(op_kind::send);
  op->handler = std::move(pending);
  if (ec)
    return complete(op, ec, 0, from::user_call);
  op->on_complete = &connection_impl::on_send_complete;
  op->length = buffers.total_size;
  op->immediate = immediate;
  if (op->length > op->small.size()) {
    op->source.assign(buffers);
  } else {
    // Copy small messages now: cheap, and the caller's buffer is free at once.
    std::byte* dst = op->small.data();
    for (std::size_t i = 0; i < buffers.count; ++i) {
      std::memcpy(dst, buffers.items[i].data(), buffers.items[i].size());
      dst += buffers.items[i].size();
    }
    op->source.items[0] = asio::const_buffer(op->small.data(), op->length);
    op->source.count = op->length > 0 ? 1 : 0;
    op->source.total_size = op->length;
    op->source.too_many = false;
  }
  queue_send(op);
}

void connection_impl::work(const work_request& request, size_operation&& pending, bool overtakes) {
  error_code ec = state_ != state::open ? ending_.for_new_work() : check_work(request);
  operation* op = new_op(op_kind::work);
  op->handler = std::move(pending);
  if (ec)
    return complete(op, ec, 0, from::user_call);
  op->on_complete = &connection_impl::on_send_complete;
  prepare_work(op, request);
  queue_send(op, overtakes);
}

bool connection_impl::post_completed(const work_request& request) {
  if (state_ != state::open || !qp_created_ || device_->iwarp || sends_.has_queued() ||
      awaiting_acknowledgement_ != 0 || sends_.full() || check_work(request))
    return false;
  operation* op = new_op(op_kind::work);
  op->on_complete = &connection_impl::on_send_complete;
  prepare_work(op, request);
  if (!(op->wr.send_flags & IBV_SEND_INLINE)) {
    op_pool_.put(op); // its bytes would be read from memory after the post
    return false;
  }
  // Not counted among the pending operations (it has no handler to wait for); a close
  // lingers for its acknowledgement as for a send completed at post.
  op->handler_less = true;
  sends_.queue(op);
  post_sends(qp_, from::user_call); // a chain of this one request (nothing was queued)
  if (state_ != state::open)
    return false; // the post failed (the request completed with the error, and closed us)
  ++completed_unacknowledged_;
  return true;
}

void connection_impl::queue_probe(size_operation&& done, bool overtakes) {
  // A zero-length RDMA write: acknowledged by the peer's transport, it needs no receive
  // buffer, no memory and no rkey there (IBTA C9-88).
  operation* probe = new_op(op_kind::work);
  probe->handler = std::move(done);
  probe->on_complete = &connection_impl::on_send_complete;
  work_request request;
  request.op = work_request::kind::write;
  prepare_work(probe, request);
  queue_send(probe, overtakes);
}

void connection_impl::post_or_batch(operation* op) {
  // An idle send queue (no completion on its way) rings the doorbell at once (latency);
  // otherwise the request joins the batch posted at the end of this io_context turn. A
  // send that completes when posted joins it too (posted from the io_context, its handler
  // runs there directly; from an initiating call it would have to be posted), and sends
  // started together go in one chain, but for the first one started by a handler of the
  // connection's own completion batch (a ping-pong's next request): that one rings the
  // doorbell at once, and its handler runs at the batch's end (after_cq_batch). Posted
  // there instead, after the handler's coroutine had suspended and the poll returned, it
  // left later: rdma_bench's ping-pong ran 1.04x slower per end on rxe0.
  const bool at_post = completes_at_post(op);
  if (sends_.signalled_outstanding() == 0 && !post_scheduled_ &&
      (!at_post || (inside_own_batch() && !rang_in_batch_))) {
    rang_in_batch_ = at_post;
    post_queued(from::user_call);
    // Posted, it can no longer be withdrawn, so it needs no cancellation handler (nor
    // does one the post failed: that one is completed, its handler moved out).
    if (op->posted || !op->handler)
      return;
  } else {
    schedule_post();
  }
  op->handler.on_cancel(op_canceller{this, op});
}

error_code connection_impl::check_work(const work_request& r) const {
  using kind = work_request::kind;
  if (r.local.too_many || r.local.count > max_send_sge_)
    return asio::error::invalid_argument; // more scatter/gather entries than the QP takes
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < r.local.count; ++i) {
    if (!r.local.items[i].in_bounds)
      return errc::out_of_bounds;
    total += r.local.items[i].length;
  }
  // What the device lacks is refused before anything is posted (iWARP has no immediate
  // data; some devices have no atomics), after the checks of the request itself.
  const bool unsupported = r.immediate && !device_->has_immediate_data();
  switch (r.op) {
  case kind::send:
    if (total > options_.max_message_size)
      return errc::message_too_large;
    break;
  case kind::read:
    // A read scatters into at most max_sge_rd entries (siw: 1; given more, it filled
    // only the first and reported success).
    if (r.local.count > std::size_t(device_->attributes.max_sge_rd > 0
                                        ? device_->attributes.max_sge_rd // 0: not reported
                                        : device_->attributes.max_sge))
      return asio::error::invalid_argument;
    [[fallthrough]];
  case kind::write:
    if (total > r.remote.length)
      return errc::out_of_bounds;
    break;
  case kind::fetch_add:
  case kind::compare_swap:
    if (r.remote.address % 8 != 0)
      return errc::misaligned;
    if (r.remote.length < 8)
      return errc::out_of_bounds;
    if (!device_->has_atomics())
      return device_->no_atomics;
    break;
  }
  return unsupported ? device_->no_immediate_data : error_code();
}

void connection_impl::prepare_work(operation* op, const work_request& r) {
  using kind = work_request::kind;
  ibv_send_wr& wr = op->wr; // wr_id and sg_list are the operation's own (operation.hpp)
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = 0;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < r.local.count; ++i) {
    const local_buffer& b = r.local.items[i];
    op->sge[i] = {reinterpret_cast<std::uintptr_t>(b.data), b.length, b.lkey};
    total += b.length;
  }
  wr.num_sge = static_cast<int>(r.local.count);
  op->length = total;
  switch (r.op) {
  case kind::send:
    wr.opcode = IBV_WR_SEND;
    break;
  case kind::write:
    wr.opcode = r.immediate ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    break;
  case kind::read:
    wr.opcode = IBV_WR_RDMA_READ;
    break;
  case kind::fetch_add:
  case kind::compare_swap:
    wr.opcode = r.op == kind::fetch_add ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.remote_addr = r.remote.address;
    wr.wr.atomic.rkey = r.remote.rkey;
    wr.wr.atomic.compare_add = r.compare_add;
    wr.wr.atomic.swap = r.swap;
    wr.num_sge = 1; // the result slot, assigned when posted
    op->atomic = true;
    break;
  }
  if (r.op == kind::write || r.op == kind::read) {
    wr.wr.rdma.remote_addr = r.remote.address;
    wr.wr.rdma.rkey = r.remote.rkey;
  }
  if (r.immediate) {
    wr.imm_data = htonl(*r.immediate);
    if (r.op == kind::send)
      wr.opcode = IBV_WR_SEND_WITH_IMM;
  }
  // A small send or write goes inline, as a copy send does: the device takes the
  // bytes when the request is posted, and needs no fetch from registered memory
  // (on SoftRoCE a lookup and copy per request in the kernel).
  if ((r.op == kind::send || r.op == kind::write) && total > 0 && total <= inline_limit_) {
    wr.send_flags |= IBV_SEND_INLINE;
    ++statistics_.inline_sends;
  }
}

void op_canceller::operator()(asio::cancellation_type) {
  impl->cancel(op);
}

void connection_impl::cancel(operation* op) {
  if (op->batch)
    return cancel_batch(op);
  // A cancellation handler is installed only while the operation waits: a receive in
  // waiting_receives_, a send in the send window's queue until it is posted.
  if (op->kind == op_kind::receive)
    waiting_receives_.remove(op);
  else if (!op->posted)
    sends_.withdraw(op);
  else
    return;
  complete(op, asio::error::operation_aborted, 0, from::user_call);
}

void connection_impl::after_cq_batch(void* context) {
  auto* self = static_cast<connection_impl*>(context);
  self->rang_in_batch_ = false;
  const bool unposted = self->has_unposted_work();
  if (unposted || self->due_) {
    // A handler run there may poll the CQ (a receive on a connection left idle by a
    // close or an error), whose batch ends here again: the flag is restored, not cleared.
    const bool outer = std::exchange(self->posting_batch_end_, true);
    const from origin = self->cq_->batch_origin(); // a poll inside an initiating call too
    if (unposted)
      self->post_queued(origin);
    // The handlers of sends posted during the batch (post_or_batch), if post_queued did
    // not run them.
    if (!self->running_due_)
      self->run_due(origin);
    self->posting_batch_end_ = outer;
  }
  if (self->ops_.batch_ended())
    self->sync_interest();
  // Last: the listener runs handlers, which may close or release this connection (the
  // completion queue's owner lock keeps it alive until the batch's call returns).
  if (self->batch_end_listener_)
    self->batch_end_listener_();
}

void connection_impl::post_queued(from origin) {
  post_scheduled_ = false;
  if (!qp_created_)
    return;
  if (sends_.has_queued()) // not so after a batch that only freed receive buffers
    post_sends(qp_, origin);
  // Receives after sends: in a request/response exchange the next request is
  // on the critical path, and the buffers just freed are not (the others of
  // the ring stay posted for the reply). One chained post for the buffers freed
  // since the last post, once there are enough of them (receive_ring::post_due).
  // (A failed post of sends may have closed the connection meanwhile.)
  if (!shared_ && receives_->post_due()) {
    if (state_ == state::closing || state_ == state::closed || !qp_created_)
      receives_->forget_released();
    else if (const auto count = receives_->released_count(); auto ec = receives_->post_to(qp_))
      begin_close(ec);
    else {
      ++statistics_.receive_posts;
      statistics_.receives_posted += count;
      if (reports_credits_) { // iWARP: the peer learns of them as credit (credit_flow.hpp)
        reporter_.posted(count);
        report_credits();
      }
    }
  }
}

void connection_impl::post_sends(ibv_qp* qp, from origin) {
  if (sends_.credit_limited()) // iWARP: the peer's word says how many receives it posted
    refresh_credits();
  // As many queued requests as the send queue has room for, chained.
  const auto chain = sends_.take([this](operation* op) {
    op->posted = true;
    op->handler.ignore_cancel(); // posted RC work cannot be withdrawn alone
    op->completed_at_post = completes_at_post(op) && awaiting_acknowledgement_ == 0;
    if (!op->completed_at_post)
      ++awaiting_acknowledgement_;
    if (op->kind == op_kind::send) {
      prepare_send(op);
    } else if (op->atomic) {
      op->send_slot = free_send_slots_.back();
      free_send_slots_.pop_back();
      op->sge[0] = {reinterpret_cast<std::uintptr_t>(atomic_block_.slot(op->send_slot)),
                    sizeof(std::uint64_t), atomic_block_.mr->lkey};
    }
  });
  // Held back by credits with nothing posted whose completion would look again.
  if (sends_.signalled_outstanding() == 0 && sends_.waits_for_credits())
    wait_for_credits();
  if (!chain.first)
    return;
  statistics_.work_requests += chain.requests;
  statistics_.signaled += chain.signaled;
  ++statistics_.posts;
  ibv_send_wr* bad = nullptr;
  if (int rc = ::ibv_post_send(qp, chain.first, &bad)) {
    // Requests from `bad` on were not posted: they complete with the error.
    auto ec = from_returned_errno(rc);
    sends_.unposted(bad, [&](operation* op) {
      if (!op->completed_at_post)
        --awaiting_acknowledgement_;
      op->completed_at_post = false;
      release_send_slot(op);
      if (op->handler_less)
        return op_pool_.put(op); // post_completed reports the failure
      complete(op, ec, 0, from::user_call);
    });
    complete_posted_sends(chain.first, bad, from::user_call);
    begin_close(ec);
    return;
  }
  complete_posted_sends(chain.first, nullptr, origin);
}

bool connection_impl::completes_at_post(const operation* op) const noexcept {
  // Copied sends where sends_complete_at_post_ (decided when the queue pair is made);
  // post_sends also requires that nothing posted before it awaits its acknowledgement
  // (RC's order). (An inline send of registered memory would qualify too, its bytes being
  // in the work request; measured on rxe0, rdma_bench's ping-pong then ran 0.96x with
  // busy polling but 1.06x with events (bench/RESULTS.md): it completes with its work
  // completion, as every zero-copy send does.) A request posted by post_completed
  // (handler_less) is never on iWARP.
  return op->handler_less || (op->kind == op_kind::send && sends_complete_at_post_);
}

void connection_impl::complete_posted_sends(ibv_send_wr* first, const ibv_send_wr* end,
                                            from origin) {
  // The chain's sends that complete now join the handlers due, in posting order, before
  // any of them runs: one list for all chains, so that handlers run in the order the sends
  // were posted whether a chain was posted from an initiating call (their run is posted)
  // or from the io_context (run now). A connection whose sends complete on acknowledgement
  // skips the walk: the post path stays as it was.
  if (!sends_complete_at_post_)
    return;
  for (ibv_send_wr* wr = first; wr != end; wr = wr->next) {
    auto* op = static_cast<operation*>(completion_target::of(wr->wr_id));
    if (!op->completed_at_post || op->handler_less)
      continue;
    op->handler_due = true;
    op->next = nullptr;
    *due_tail_ = op;
    due_tail_ = &op->next;
  }
  if (origin != from::completion_path && inside_own_batch())
    return; // posted by a handler of the batch (post_or_batch): run at its end
  run_due(origin);
}

void connection_impl::run_due_handlers() {
  // A handler may start work, close the connection, and so poll the completion queue,
  // which may report a due send acknowledged (complete() leaves it to this loop), or post
  // more sends (appended: this loop runs them in turn).
  if (running_due_)
    return;
  running_due_ = true;
  while (operation* op = due_) {
    due_ = op->next;
    if (!due_)
      due_tail_ = &due_;
    op->handler_due = false;
    if (std::exchange(op->counted, false))
      op_finished();
    if (op->acknowledged)
      op_pool_.put(op); // its slot was released with its completion
    else
      ++completed_unacknowledged_;
    // In place: the call moves the handler out of the record before it runs it
    // (inline_handler), so the record is free for the handler's next operation.
    op->handler.complete(ex_, from::completion_path, error_code(), std::size_t(op->length));
  }
  running_due_ = false;
}

void connection_impl::prepare_send(operation* op) {
  ibv_send_wr& wr = op->wr; // wr_id and sg_list are the operation's own (operation.hpp)
  wr.opcode = op->immediate ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = op->immediate ? htonl(*op->immediate) : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  op->send_slot = operation::no_slot;
  const auto& src = op->source;
  if (op->length == 0) {
    wr.num_sge = 0;
  } else if (op->length <= inline_limit_ && src.count <= max_send_sge_) {
    // Inline: the device copies from the user's memory at post time, so no
    // registration is needed and the buffers are free once posted.
    for (std::size_t i = 0; i < src.count; ++i)
      op->sge[i] = {reinterpret_cast<std::uintptr_t>(src.items[i].data()),
                    static_cast<std::uint32_t>(src.items[i].size()), 0};
    wr.num_sge = static_cast<int>(src.count);
    wr.send_flags |= IBV_SEND_INLINE;
    ++statistics_.inline_sends;
  } else {
    op->send_slot = free_send_slots_.back();
    free_send_slots_.pop_back();
    std::byte* dst = send_block_.slot(op->send_slot);
    for (std::size_t i = 0; i < src.count; ++i) {
      std::memcpy(dst, src.items[i].data(), src.items[i].size());
      dst += src.items[i].size();
    }
    op->sge[0] = {reinterpret_cast<std::uintptr_t>(send_block_.slot(op->send_slot)),
                  static_cast<std::uint32_t>(op->length), send_block_.mr->lkey};
    wr.num_sge = 1;
  }
}

void connection_impl::on_send_complete(completion_target* target, const ibv_wc& wc, from origin) {
  auto* op = static_cast<operation*>(target);
  connection_impl* self = op->owner;
  ++self->completions_;
  // A shared CQ does not keep this connection alive through the batch.
  std::shared_ptr<connection_impl> keep_alive;
  if (self->shared_)
    keep_alive = self->shared_from_this();
  // Unsignalled requests posted before this one have completed successfully.
  self->sends_.completed(op, wc.status, [self, origin](operation* done, ibv_wc_status status) {
    // A send completed at post, acknowledged (the common case of a copied send): nothing
    // to deliver, no call.
    if (done->completed_at_post && status == IBV_WC_SUCCESS) [[likely]]
      return self->retire_completed_at_post(done);
    self->finish_posted(done, status, origin);
  });
  if (self->shared_ && self->sends_.has_queued())
    self->schedule_post(); // no per-connection batch end on a shared CQ
  self->maybe_finish_close();
}

void connection_impl::finish_posted(operation* op, ibv_wc_status status, from origin) {
  std::uint64_t value = op->length;
  if (!op->completed_at_post)
    --awaiting_acknowledgement_;
  if (op->atomic && status == IBV_WC_SUCCESS)
    std::memcpy(&value, atomic_block_.slot(op->send_slot), sizeof value);
  release_send_slot(op);
  error_code ec;
  // SoftiWARP completes the request it was transmitting when the connection died (the
  // peer gone, its TCP connection reset) with IBV_WC_LOC_QP_OP_ERR, and flushes the rest:
  // on iWARP that is the same failure as a flush.
  const bool flushed = status == IBV_WC_WR_FLUSH_ERR ||
                       (status == IBV_WC_LOC_QP_OP_ERR && device_->iwarp && state_ == state::open);
  if (flushed && state_ == state::open) {
    // Flushed though we did not close: the queue pair failed under us (iWARP: the peer
    // terminated the connection, after an error at its end, or went away).
    if (status != IBV_WC_WR_FLUSH_ERR)
      ASIO_RDMA_TRACE("%s while open on iWARP: taken as the connection's end",
                      ::ibv_wc_status_str(status));
    ec = asio::error::connection_reset;
    queue_pair_failed();
  } else if (status == IBV_WC_WR_FLUSH_ERR) {
    ec = ending_.for_withdrawn_work();
  } else if (status != IBV_WC_SUCCESS) {
    ec = make_wc_error(status);
    begin_close(ec);
  }
  complete(op, ec, ec ? 0 : value, origin);
}

void connection_impl::complete(operation* op, error_code ec, std::size_t bytes, from origin,
                               const received_message* message) {
  if (op->completed_at_post) {
    // An error it met has closed the connection (finish_posted): the pending and later
    // operations get it.
    return retire_completed_at_post(op);
  }
  if (op->batch && !finish_batch_part(op, ec, bytes))
    return; // other requests of its batch are outstanding
  // The record back to the pool and the count down, then its handler completed in place:
  // the call moves the handler out of the record before it runs it (inline_handler), so
  // the handler may start its next operation in this record. Nothing in between takes a
  // record: the count reaching zero only stops waiting on the CQ (sync_interest polls
  // only when a wait starts).
  op_pool_.put(op);
  if (op->counted)
    op_finished();
  if (op->kind == op_kind::receive)
    return op->receive_handler.complete(
        ex_, origin, ec, message ? *message : received_message{bytes, std::nullopt, false});
  op->handler.complete(ex_, origin, ec, bytes);
}

} // namespace asio_rdma::detail
