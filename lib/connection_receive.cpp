// connection_impl: the receive side of the data path: pending receives,
// messages arrived in the library's receive buffers, delivery in arrival
// order, reposting the buffers, and the remote-buffer advertisement wait.
#include "connection_impl.hpp"

#include "handler_completion.hpp"
#include "shared_queues_impl.hpp"
#include "verbs_error.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>

namespace asio_rdma::detail {

void connection_impl::receive(const buffer_view<asio::mutable_buffer>& buffers,
                              size_handler handler, bool direct) {
  operation* op = new_receive(buffers, direct);
  assign_handler(op->handler, std::move(handler));
  start_receive(op);
}

void connection_impl::receive_message(const buffer_view<asio::mutable_buffer>& buffers,
                                      message_handler handler, bool direct) {
  operation* op = new_receive(buffers, direct);
  op->wants_message = true;
  assign_handler(op->message_handler_, std::move(handler));
  start_receive(op);
}

operation* connection_impl::new_receive(const buffer_view<asio::mutable_buffer>& buffers,
                                        bool direct) {
  operation* op = new_op(op_kind::receive, direct);
  op->destination.assign(buffers);
  return op;
}

void connection_impl::start_receive(operation* op) {
  if (op->destination.too_many)
    return complete(op, asio::error::invalid_argument, 0, true);
  // Messages may be waiting in the CQ: nobody polls it while no operation is pending.
  // The poll runs other operations' handlers, which may drop the last reference.
  // (Inside a poll, as when a handler starts the next receive, there is
  // nothing to poll and nothing to keep alive.)
  std::shared_ptr<connection_impl> keep_alive;
  if (arrived_count_ == 0 && state_ == state::open && cq_ && !cq_->polling()) {
    keep_alive = shared_from_this();
    cq_->poll();
  }
  if (state_ != state::open && arrived_count_ == 0)
    return complete(op, terminal_error(true), 0, true);
  op->counted = true;
  op_started();
  waiting_receives_.push(op);
  auto slot = op->wants_message ? asio::get_associated_cancellation_slot(op->message_handler_)
                                : asio::get_associated_cancellation_slot(op->handler);
  if (slot.is_connected())
    slot.template emplace<op_canceller>(op_canceller{this, op});
  // A message is already here: deliver it from a posted task, through the
  // same FIFO as every other delivery, so that receive handlers always run
  // in the order the messages arrived (never from this initiating function).
  if (arrived_count_ > 0)
    schedule_delivery();
}

void connection_impl::schedule_delivery() {
  if (delivery_scheduled_)
    return;
  delivery_scheduled_ = true;
  asio::post(ex_, [self = shared_from_this()] {
    self->delivery_scheduled_ = false;
    self->deliver_waiting();
    self->flush(); // repost the buffers just emptied
  });
}

void connection_impl::receive_remote_buffer(std::chrono::milliseconds timeout,
                                            remote_buffer_handler handler) {
  // A receive into a small buffer of our own, bounded by a timer that cancels
  // it; the user's cancellation is forwarded the same way.
  struct advert_wait {
    explicit advert_wait(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    asio::cancellation_signal cancel;
    std::array<std::byte, 64> bytes{};
    remote_buffer_handler handler;
    bool timed_out = false;
  };
  auto wait = std::make_shared<advert_wait>(ex_);
  assign_handler(wait->handler, std::move(handler));
  auto user_slot = asio::get_associated_cancellation_slot(wait->handler);
  if (user_slot.is_connected())
    user_slot.assign([w = std::weak_ptr<advert_wait>(wait)](asio::cancellation_type type) {
      if (auto locked = w.lock())
        locked->cancel.emit(type);
    });
  wait->timer.expires_after(timeout);
  wait->timer.async_wait([w = std::weak_ptr<advert_wait>(wait)](const error_code& ec) {
    auto locked = w.lock();
    if (!ec && locked) {
      locked->timed_out = true;
      locked->cancel.emit(asio::cancellation_type::terminal);
    }
  });
  const single_buffer<asio::mutable_buffer> buffer{asio::buffer(wait->bytes)};
  receive(buffer.view(),
          asio::bind_cancellation_slot(
              wait->cancel.slot(),
              [wait, ex = ex_](error_code ec, std::size_t n) {
                wait->timer.cancel();
                auto slot = asio::get_associated_cancellation_slot(wait->handler);
                if (slot.is_connected())
                  slot.clear();
                remote_buffer result;
                if (!ec)
                  result = remote_buffer::decode(std::span(wait->bytes.data(), n), ec);
                else if (ec == asio::error::operation_aborted && wait->timed_out)
                  ec = asio::error::timed_out;
                else if (ec == errc::buffer_too_small)
                  ec = errc::protocol_error; // far longer than an advertisement
                dispatch_handler(ex, std::move(wait->handler), ec, result);
              }),
          true);
}

void connection_impl::on_receive_complete(completion_target* target, const ibv_wc& wc) {
  auto* slot = static_cast<receive_slot*>(target);
  auto* self = static_cast<connection_impl*>(slot->owner);
  self->handle_receive(slot->index, wc);
}

void connection_impl::handle_receive(std::uint32_t index, const ibv_wc& wc) {
  ++activity_;
  if (wc.status == IBV_WC_SUCCESS) {
    auto& msg = arrived_[(arrived_head_ + arrived_count_) % arrived_.size()];
    msg.slot = index;
    msg.length = wc.byte_len;
    msg.has_immediate = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    msg.immediate = msg.has_immediate ? ntohl(wc.imm_data) : 0;
    msg.rdma_write = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
    ++arrived_count_;
  } else {
    release_receive(index); // a failed receive holds no message
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      begin_close(make_wc_error(wc.status));
  }
  deliver_waiting();
  maybe_finish_close();
}

void connection_impl::deliver_waiting() {
  while (!waiting_receives_.empty() && arrived_count_ > 0)
    deliver(waiting_receives_.pop());
  if (state_ == state::closing || state_ == state::closed)
    fail_waiting_receives(false);
}

void connection_impl::fail_waiting_receives(bool defer) {
  if (arrived_count_ > 0)
    return; // messages still to deliver come first
  while (!waiting_receives_.empty())
    complete(waiting_receives_.pop(), terminal_error(true), 0, defer);
}

void connection_impl::deliver(operation* op) {
  const arrived_message msg = arrived_[arrived_head_];
  const auto& dst = op->destination;
  if (!msg.rdma_write) { // an RDMA write with immediate left its data in our region
    if (msg.length > dst.total_size)
      return complete(op, errc::buffer_too_small, 0, false); // message stays queued
    const std::byte* src = receives_->slot(msg.slot);
    std::size_t left = msg.length;
    for (std::size_t i = 0; i < dst.count && left > 0; ++i) {
      std::size_t n = std::min(left, dst.buffers[i].size());
      std::memcpy(dst.buffers[i].data(), src, n);
      src += n;
      left -= n;
    }
  }
  release_receive(msg.slot);
  arrived_head_ = (arrived_head_ + 1) % arrived_.size();
  --arrived_count_;
  received_message result;
  result.size = msg.length;
  if (msg.has_immediate)
    result.immediate = msg.immediate;
  result.rdma_write = msg.rdma_write;
  complete(op, {}, msg.length, false, &result);
}

void connection_impl::release_receive(std::uint32_t slot) {
  if (shared_)
    shared_->release(slot);
  else
    receives_->release(slot);
}

} // namespace asio_rdma::detail
