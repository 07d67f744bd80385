#include "completion_queue.hpp"

#include "verbs_error.hpp"

#include <fcntl.h>

namespace asio_rdma::detail {

std::shared_ptr<completion_queue> completion_queue::create(const asio::any_io_executor& ex,
                                                           ibv_context* device, int entries,
                                                           error_code& ec) {
  comp_channel_ptr channel(::ibv_create_comp_channel(device));
  if (!channel) {
    ec = from_errno();
    return nullptr;
  }
  int flags = ::fcntl(channel->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    ec = from_errno();
    return nullptr;
  }
  cq_ptr cq(::ibv_create_cq(device, entries, nullptr, channel.get(), 0));
  if (!cq) {
    ec = from_errno();
    return nullptr;
  }
  ec = {};
  auto self = std::make_shared<completion_queue>(ex, std::move(channel), std::move(cq));
  self->waiter_.set_owner(self);
  return self;
}

completion_queue::completion_queue(const asio::any_io_executor& ex, comp_channel_ptr channel,
                                   cq_ptr cq)
    : ex_(ex), channel_(std::move(channel)), cq_(std::move(cq)),
      waiter_(ex, channel_->fd, &completion_queue::on_readable, this) {}

completion_queue::~completion_queue() {
  if (unacked_events_ > 0)
    ::ibv_ack_cq_events(cq_.get(), unacked_events_);
  // Members are destroyed in reverse order: the CQ before its channel.
}

error_code completion_queue::start() {
  if (int rc = ::ibv_req_notify_cq(cq_.get(), 0))
    return from_returned_errno(rc);
  return {};
}

void completion_queue::stop() {
  stopped_ = true;
  waiter_.stop();
}

void completion_queue::drain_events() {
  auto keep_alive = shared_from_this();
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (::ibv_get_cq_event(channel_.get(), &cq, &context) == 0)
    ++unacked_events_;
  if (unacked_events_ >= ack_batch) {
    ::ibv_ack_cq_events(cq_.get(), unacked_events_);
    unacked_events_ = 0;
  }
  // Re-arm before the final drain: a completion that arrives after the last
  // poll then raises a new event instead of being stranded.
  ::ibv_req_notify_cq(cq_.get(), 0);
  poll();
}

void completion_queue::poll() {
  if (polling_)
    return;
  auto keep_alive = shared_from_this();
  auto owner = owner_.lock();
  if (!owner)
    return;
  polling_ = true;
  ibv_wc wc[batch_size];
  for (;;) {
    int n = ::ibv_poll_cq(cq_.get(), batch_size, wc);
    if (n <= 0)
      break; // empty, or a failed poll: nothing to dispatch
    for (int i = 0; i < n; ++i) {
      auto* target = completion_target::from(wc[i]);
      target->on_complete(target, wc[i]);
    }
    if (n < batch_size)
      break;
  }
  polling_ = false;
  if (listener_.after_batch)
    listener_.after_batch(listener_.context);
}

} // namespace asio_rdma::detail
