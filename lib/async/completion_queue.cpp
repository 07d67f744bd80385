#include "async/completion_queue.hpp"

#include "verbs/verbs_error.hpp"

#include <asio_rdma/detail/posted_continuation.hpp>

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
  if ((ec = set_nonblocking(channel->fd)))
    return nullptr;
  event_counted_cq cq;
  if ((ec = cq.create(device, entries, channel.get())))
    return nullptr;
  return std::make_shared<completion_queue>(ex, std::move(channel), std::move(cq));
}

completion_queue::completion_queue(const asio::any_io_executor& ex, comp_channel_ptr channel,
                                   event_counted_cq cq)
    : ex_(ex), channel_(std::move(channel)), cq_(std::move(cq)),
      waiter_(ex, channel_->fd, {&completion_queue::on_readable, this}) {}

// cq_ acknowledges its events and is destroyed before channel_ (member order).
completion_queue::~completion_queue() = default;

error_code completion_queue::arm() {
  if (auto ec = cq_.arm())
    return ec;
  armed_ = true;
  return {};
}

void completion_queue::add_interest() {
  if (interest_++ > 0)
    return;
  if (mode_ == completion_mode::event) {
    listen_to_channel(true);
  } else {
    last_activity_ = std::chrono::steady_clock::now();
    schedule_spin();
  }
}

void completion_queue::remove_interest() {
  if (--interest_ == 0)
    listen_to_channel(false); // a spin loop ends by itself
}

void completion_queue::listen_to_channel(bool on) {
  if (on == channel_interest_)
    return;
  channel_interest_ = on;
  if (!on)
    return waiter_.remove_interest();
  // Re-arm (a system call on some devices) only if an event was consumed
  // since the last arming: an armed CQ stays armed until it raises an event,
  // and an event raised meanwhile is waiting in the channel. Then poll once
  // more, so that a completion that arrived in between is not left behind.
  if (!armed_) {
    cq_.arm();
    armed_ = true;
  }
  // The poll runs handlers, which may close the owner and drop the last reference to
  // this queue (seen under ASan: a datagram socket closed by a handler that a send's
  // own poll ran); the waiter is used after it.
  auto keep_alive = shared_from_this();
  poll();
  waiter_.add_interest();
}

void completion_queue::schedule_spin() {
  if (spin_scheduled_ || stopped_)
    return;
  spin_scheduled_ = true;
  post_continuation(ex_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->spin_scheduled_ = false;
      self->spin();
    }
  });
}

void completion_queue::spin() {
  if (stopped_ || interest_ == 0)
    return;
  // Poll in a tight loop before yielding: every trip through the scheduler
  // costs a reactor turn (an epoll_wait system call), far more than an empty
  // ibv_poll_cq. A completion does not end the turn: in a request/response
  // exchange the next one (the send's own, then the reply) follows closely, and
  // a trip through the scheduler between them lands on the critical path. A
  // turn that dispatched a full batch yields, so that what its handlers posted
  // (a shared queue's flush, a delivery) and other handlers get to run.
  // One keep-alive for the turn, not one per empty poll.
  auto owner = owner_.lock();
  if (!owner)
    return;
  // A handler the polls ran (or one before this turn) may have posted work: yield to it
  // after this poll (at least one a turn, so that posting never starves the queue).
  bool& posted = work_posted;
  int found = 0;
  for (int i = 0; i < spin_polls && found < batch_size && interest_ > 0 && !stopped_; ++i) {
    found += poll_unguarded(from::completion_path);
    if (posted)
      break;
  }
  posted = false; // what was posted runs before the next turn
  const auto now = std::chrono::steady_clock::now();
  if (found > 0)
    last_activity_ = now;
  if (interest_ == 0)
    return;
  if (mode_ == completion_mode::busy_poll || now - last_activity_ < spin_) {
    listen_to_channel(false);
    schedule_spin(); // yields to other handlers between polls
  } else {
    listen_to_channel(true); // adaptive: idle long enough, sleep on the channel
  }
}

void completion_queue::stop() {
  stopped_ = true;
  after_batch_ = {};
  waiter_.stop();
}

void completion_queue::drain_events() {
  // One keep-alive for the whole drain: the handlers may drop the last reference to the
  // owner, which owns this queue (attach()), so holding the owner holds the queue too.
  // Without an owner nothing is dispatched, and nothing else here can destroy the queue
  // (its waiter, which called this, checked that it is alive).
  auto owner = owner_.lock();
  cq_.take_event(channel_.get()); // one event at most (verbs/completion.hpp says why)
  // Re-arm before the final drain: a completion that arrives after the last
  // poll then raises a new event instead of being stranded.
  cq_.arm();
  armed_ = true;
  if (owner)
    poll_unguarded(from::completion_path);
  if (mode_ == completion_mode::adaptive && interest_ > 0) {
    // Activity: poll for a while instead of waiting for the next event.
    last_activity_ = std::chrono::steady_clock::now();
    listen_to_channel(false);
    schedule_spin();
  }
}

int completion_queue::poll() {
  if (polling_)
    return 0;
  auto keep_alive = shared_from_this();
  auto owner = owner_.lock();
  if (!owner)
    return 0;
  return poll_unguarded(from::user_call);
}

int completion_queue::poll_unguarded(from origin) {
  if (polling_)
    return 0;
  polling_ = true;
  batch_origin_ = origin;
  int dispatched = 0;
  ibv_wc wc[batch_size];
  for (;;) {
    int n = ::ibv_poll_cq(cq_.get(), batch_size, wc);
    if (n <= 0)
      break; // empty, or a failed poll: nothing to dispatch
    for (int i = 0; i < n; ++i) {
      auto* target = completion_target::of(wc[i]);
      target->on_complete(target, wc[i], origin);
    }
    dispatched += n;
    if (n < batch_size)
      break;
  }
  polling_ = false;
  if (after_batch_)
    after_batch_();
  return dispatched;
}

} // namespace asio_rdma::detail
