// connection_impl: the receive side of the data path: pending receives,
// messages arrived in the library's receive buffers, delivery in arrival
// order, reposting the buffers.
#include "rc/connection_impl.hpp"

#include "rc/shared_queues_impl.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/assert.hpp>

#include <cstring>
#include <utility>

namespace asio_rdma::detail {

namespace {
/// What a receive's handler or the listener is told of `msg` (its bytes aside).
void describe(received_message& result, const arrived_message& msg) noexcept {
  result.size = msg.length;
  if (msg.has_immediate)
    result.immediate = msg.immediate;
  result.rdma_write = msg.rdma_write;
}
} // namespace

void start_receive(connection_impl* impl, const buffer_view<asio::mutable_buffer>& buffers,
                   message_operation&& pending) {
  impl->receive(buffers, std::move(pending));
}

void start_receive_lent(connection_impl* impl, message_operation&& pending) {
  impl->receive({}, std::move(pending), true);
}

std::shared_ptr<connection_impl> connection_impl::poll_cq_now() {
  auto keep_alive = shared_from_this();
  cq_->poll();
  return keep_alive;
}

void connection_impl::receive(const buffer_view<asio::mutable_buffer>& buffers,
                              message_operation&& pending, bool lends) {
  operation* op = new_op(op_kind::receive);
  op->receive_handler = std::move(pending);
  op->destination.assign(buffers);
  op->lends = lends;
  if (lends)
    op->destination.total_size = SIZE_MAX; // every message fits (fits()): none is copied
  // More buffers than a receive takes; or a stream owns this connection's messages
  // (listen): a receive would wait for ever.
  if (op->destination.too_many || listener_) [[unlikely]]
    return complete(op, asio::error::invalid_argument, 0, from::user_call);
  const auto keep_alive = poll_unwatched_cq(); // until this call returns
  if (state_ != state::open && arrived_.empty())
    return complete(op, ending_.for_receive(), 0, from::user_call);
  op->counted = true;
  op_started();
  waiting_receives_.push(op);
  op->receive_handler.on_cancel(op_canceller{this, op});
  // A message is already here: deliver it from a posted task, through the
  // same FIFO as every other delivery, so that receive handlers always run
  // in the order the messages arrived (never from this initiating function).
  if (!arrived_.empty())
    schedule_delivery();
}

void connection_impl::listen(message_listener listener) {
  if (!listener) {
    if (std::exchange(listener_, {}))
      op_finished();
    return;
  }
  BOOST_ASSERT(!listener_);
  // What the poll finds queues (no listener yet), delivered by the task below.
  const auto keep_alive = poll_unwatched_cq(); // until this call returns
  listener_ = listener;
  op_started();
  if (!arrived_.empty() || state_ != state::open)
    schedule_delivery();
}

void connection_impl::delivery_task() {
  deliver_waiting(from::completion_path);
  post_queued(); // repost the buffers just emptied
}

void connection_impl::on_receive_complete(completion_target* target, const ibv_wc& wc,
                                          from origin) {
  auto* slot = static_cast<receive_slot*>(target);
  auto* self = static_cast<connection_impl*>(slot->owner);
  self->handle_receive(slot->index, wc, origin);
}

void connection_impl::handle_receive(std::uint32_t index, const ibv_wc& wc, from origin) {
  ++completions_;
  if (!shared_)
    receives_->consumed();
  if (wc.status == IBV_WC_SUCCESS) {
    if (reports_credits_)
      reporter_.arrived();
    const arrived_message msg = arrived_message::from(index, wc);
    operation* waiting = waiting_receives_.front();
    // The common case (a receive waits, or a listener, no earlier message is queued, it
    // fits): hand the message over without queueing it. Otherwise it queues, in arrival
    // order. A listener is told only from the completion path (deliver_waiting).
    if (listener_ && arrived_.empty() && origin == from::completion_path) {
      tell_listener(msg);
    } else if (waiting && arrived_.empty() && fits(msg, waiting->destination)) {
      waiting_receives_.pop();
      hand_over(waiting, msg, origin);
    } else {
      arrived_.push(msg);
    }
  } else {
    release_receive(index); // a failed receive holds no message
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      begin_close(make_wc_error(wc.status));
    else if (state_ == state::open)
      queue_pair_failed();
  }
  deliver_waiting(origin);
  maybe_finish_close();
}

void connection_impl::deliver_arrived(from origin) {
  if (listener_ && !arrived_.empty()) {
    if (origin != from::completion_path)
      return schedule_delivery(); // its task delivers them, and the end after them
    while (listener_ && !arrived_.empty()) {
      const arrived_message msg = arrived_.front();
      arrived_.pop();
      tell_listener(msg);
    }
  }
  while (!waiting_receives_.empty() && !arrived_.empty())
    deliver(waiting_receives_.pop(), origin);
  if (state_ == state::closing || state_ == state::closed)
    fail_waiting_receives(origin);
}

void connection_impl::fail_waiting_receives(from origin) {
  if (!arrived_.empty())
    return; // messages still to deliver come first
  while (!waiting_receives_.empty())
    complete(waiting_receives_.pop(), ending_.for_receive(), 0, origin);
  if (listener_) {
    if (origin == from::completion_path)
      end_listener();
    else
      schedule_delivery(); // its task ends the listener, outside the user's call
  }
}

void connection_impl::end_listener() {
  const message_listener told = std::exchange(listener_, {});
  op_finished();
  told.function(told.context, ending_.for_receive(), received_message{});
}

void connection_impl::tell_listener(const arrived_message& msg) {
  received_message result;
  describe(result, msg);
  error_code ec;
  if (!msg.rdma_write) {
    if (msg.length <= listener_.into.size())
      std::memcpy(listener_.into.data(), receives_->slot(msg.slot), msg.length);
    else
      ec = errc::buffer_too_small;
  }
  release_receive(msg.slot);
  listener_.function(listener_.context, ec, result);
}

void connection_impl::deliver(operation* op, from origin) {
  const arrived_message msg = arrived_.front();
  if (!fits(msg, op->destination))
    return complete(op, errc::buffer_too_small, 0, origin); // message stays queued
  arrived_.pop(); // before the handler runs: it may start the next receive
  hand_over(op, msg, origin);
}

void connection_impl::hand_over(operation* op, const arrived_message& msg, from origin) {
  // A lending receive takes the slot as it is; an RDMA write with immediate has nothing
  // in it to lend.
  received_message result;
  if (op->lends && !msg.rdma_write) [[unlikely]] {
    result.lent = true;
    result.lent_slot = msg.slot;
  } else {
    if (!msg.rdma_write)
      scatter(receives_->slot(msg.slot), msg.length, op->destination);
    release_receive(msg.slot);
  }
  describe(result, msg);
  complete(op, {}, msg.length, origin, &result);
}

void connection_impl::take_back(std::uint32_t slot) noexcept {
  release_receive(slot);
  // A shared receive queue reposts its own; a ring of our own is reposted at the end of
  // this turn (or of the completion batch running now: schedule_post), as an emptied slot is.
  if (!shared_ && state_ == state::open && receives_->post_due())
    schedule_post();
}

void connection_impl::release_receive(std::uint32_t slot) {
  if (shared_)
    shared_->release(slot);
  else
    receives_->release(slot);
}

} // namespace asio_rdma::detail

namespace asio_rdma {

const std::byte* detail::lent_bytes(detail::connection_impl* impl, std::uint32_t slot) noexcept {
  return impl->receive_slot_bytes(slot);
}

void lent_message::give_back() noexcept {
  auto lender = std::move(lender_); // the last reference may go with it
  lender->take_back(slot_);
}

} // namespace asio_rdma
