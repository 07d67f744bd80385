#include "raw/raw_socket_core.hpp"

#include "asio_alias.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>

namespace asio_rdma::detail {

namespace {

std::optional<asio::ip::address_v4> multicast_group(const std::optional<flow_rule>& rule) {
  if (rule && rule->ipv4_destination && rule->ipv4_destination->is_multicast())
    return rule->ipv4_destination;
  return std::nullopt;
}

// Longer than any real wait; beyond it a timer's time_point arithmetic could overflow.
constexpr auto longest_timeout = std::chrono::hours(24 * 365 * 100);

} // namespace

raw_socket_core::raw_socket_core(asio::any_io_executor ex, interface_info interface,
                                 std::unique_ptr<backend> backend,
                                 std::unique_ptr<multicast_groups> groups)
    : executor_(std::move(ex)), interface_(std::move(interface)), groups_(std::move(groups)),
      backend_(std::move(backend)), receive_deadline_(executor_), receive_timer_(executor_),
      tx_timer_(executor_), slots_(backend_->caps().max_flows) {}

raw_socket_core::~raw_socket_core() {
  close();
}

error_code raw_socket_core::register_descriptors() {
  const int receive_fd = backend_->receive_fd();
  const int send_fd = backend_->send_fd();
  try { // fd_waiter registers its fd with the reactor, throwing on failure
    if (receive_fd >= 0)
      receive_waiter_.emplace(executor_, receive_fd,
                              callback{&on_fd_ready<false, fd_waiter::read>, this},
                              callback{&on_fd_ready<false, fd_waiter::write>, this});
    if (send_fd >= 0 && send_fd != receive_fd)
      send_waiter_.emplace(executor_, send_fd, callback{&on_fd_ready<true, fd_waiter::read>, this},
                           callback{&on_fd_ready<true, fd_waiter::write>, this});
  } catch (const boost::system::system_error& e) {
    return e.code();
  }
  return {};
}

fd_waiter* raw_socket_core::waiter_for(int fd) noexcept {
  if (fd < 0)
    return nullptr;
  if (receive_waiter_ && fd == backend_->receive_fd())
    return &*receive_waiter_;
  if (send_waiter_ && fd == backend_->send_fd())
    return &*send_waiter_;
  return nullptr;
}

template <bool Send, fd_waiter::direction D> void raw_socket_core::on_fd_ready(void* context) {
  // What the handlers run may drop the last reference to the socket.
  auto self = static_cast<raw_socket_core*>(context)->shared_from_this();
  const fd_waiter* waiter = Send ? &*self->send_waiter_ : &*self->receive_waiter_;
  if (self->receive_interest_.is(waiter, D)) {
    withdraw(self->receive_interest_);
    self->on_receive_wait(self->receive_.generation, true, {});
  }
  if (!self->closed_ && self->tx_interest_.is(waiter, D)) {
    withdraw(self->tx_interest_);
    self->on_tx_wait(0, true, {});
  }
}

void raw_socket_core::withdraw(fd_interest& interest) noexcept {
  if (interest.waiter)
    interest.waiter->remove_interest(interest.direction);
  interest = {};
}

void raw_socket_core::close() noexcept {
  if (closed_)
    return;
  closed_ = true;
  // Handlers are posted, never run from here: close() may be called from a destructor or
  // from inside another handler.
  if (receive_.active)
    finish_receive(asio::error::operation_aborted, 0, from::user_call);
  if (acquire_.active)
    finish_acquire(asio::error::operation_aborted, 0, from::user_call);
  if (send_.active)
    finish_send(asio::error::operation_aborted, from::user_call);
  if (flush_.active)
    finish_flush(asio::error::operation_aborted, from::user_call);
  receive_deadline_.cancel();
  receive_timer_.cancel();
  tx_timer_.cancel();
  // The waiters release (do not close) the fds, which the backend owns and closes, and
  // withdraw their pending waits.
  receive_interest_ = tx_interest_ = {};
  receive_waiter_.reset();
  send_waiter_.reset();
  backend_->shutdown();
  if (groups_)
    groups_->leave_all();
  for (auto& slot : slots_) {
    slot.rule.reset();
    ++slot.generation;
  }
}

void raw_socket_core::cancel() noexcept {
  for (auto kind : {operation_kind::receive, operation_kind::acquire, operation_kind::send,
                    operation_kind::flush})
    request_cancel(kind);
}

// --- flows ---

flow_handle raw_socket_core::add_flow(const flow_rule& rule, error_code& ec) {
  flow_handle handle;
  if (closed_) {
    ec = asio::error::bad_descriptor;
    return handle;
  }
  auto free = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return !s.rule; });
  if (free == slots_.end()) {
    ec = errc::too_many_flows;
    return handle;
  }
  const auto index = static_cast<std::size_t>(free - slots_.begin());
  const auto generation = set_flow(index, rule, ec);
  if (ec)
    return handle;
  handle.owner_ = weak_from_this();
  handle.index_ = index;
  handle.generation_ = generation;
  return handle;
}

std::uint64_t raw_socket_core::set_flow(std::size_t index, const flow_rule& rule, error_code& ec) {
  if (closed_) {
    ec = asio::error::bad_descriptor;
    return 0;
  }
  if (index >= slots_.size()) {
    ec = errc::too_many_flows;
    return 0;
  }
  const flow_rule normalized = normalize(rule, ec);
  if (ec)
    return 0;
  const auto group = multicast_group(normalized);
  if (group && (ec = groups_->join(*group)))
    return 0;
  if ((ec = backend_->set_flow(index, normalized))) {
    if (group)
      groups_->leave(*group);
    return 0;
  }
  flow_slot& slot = slots_[index];
  if (auto previous = multicast_group(slot.rule))
    groups_->leave(*previous);
  slot.rule = normalized;
  return ++slot.generation;
}

void raw_socket_core::clear_flow(std::size_t index, error_code& ec) noexcept {
  ec = {};
  if (closed_) {
    ec = asio::error::bad_descriptor;
    return;
  }
  if (index >= slots_.size()) {
    ec = errc::too_many_flows;
    return;
  }
  flow_slot& slot = slots_[index];
  if (!slot.rule)
    return;
  if ((ec = backend_->clear_flow(index)))
    return;
  if (auto group = multicast_group(slot.rule))
    groups_->leave(*group);
  slot.rule.reset();
  ++slot.generation;
}

bool raw_socket_core::owns_flow(std::size_t index, std::uint64_t generation) const noexcept {
  return !closed_ && index < slots_.size() && slots_[index].rule &&
         slots_[index].generation == generation;
}

// --- operation plumbing ---

template <typename Signature>
void raw_socket_core::begin(raw_operation<Signature>& op,
                            pending_operation<Signature>&& pending, operation_kind kind) {
  op.handler = std::move(pending);
  op.work = op.handler.tracked_executor(executor_);
  op.active = true;
  op.cancel_requested = false;
  ++op.generation;
  op.handler.on_cancel([this, kind](asio::cancellation_type) { request_cancel(kind); });
}

template <typename Signature, typename... Args>
void raw_socket_core::finish(raw_operation<Signature>& op, from origin, Args&&... args) {
  auto handler = std::move(op.handler);
  auto work = std::move(op.work); // kept while the operation waited; released once delivered
  op.work = {};
  op.active = false;
  op.cancel_requested = false;
  ++op.generation;
  handler.complete_on(work, executor_, origin,
                      std::forward<Args>(args)...);
}

void raw_socket_core::request_cancel(operation_kind kind) noexcept {
  // Runs inside the cancellation slot's handler, which must not be cleared from here: the
  // operation completes from a posted step.
  auto self = shared_from_this();
  switch (kind) {
  case operation_kind::receive:
    if (!receive_.active)
      return;
    receive_.cancel_requested = true;
    asio::post(executor_,
               [self, generation = receive_.generation] { self->receive_step(generation); });
    return;
  case operation_kind::acquire:
  case operation_kind::send:
  case operation_kind::flush: {
    auto& flag = kind == operation_kind::acquire ? acquire_.cancel_requested
                 : kind == operation_kind::send  ? send_.cancel_requested
                                                 : flush_.cancel_requested;
    const bool active = kind == operation_kind::acquire ? acquire_.active
                        : kind == operation_kind::send  ? send_.active
                                                        : flush_.active;
    if (!active)
      return;
    flag = true;
    asio::post(executor_, [self] { self->tx_step(); });
    return;
  }
  }
}

void raw_socket_core::wait(const wait_plan& plan, fd_interest& interest, asio::steady_timer& timer,
                           void (raw_socket_core::*on_ready)(std::uint64_t, bool, error_code),
                           std::uint64_t generation) {
  auto* waiter = waiter_for(plan.fd);
  if (plan.kind == wait_plan::timer || !waiter) {
    // (No descriptor only after a backend fault: poll rather than wait forever.)
    timer.expires_after(plan.kind == wait_plan::timer ? plan.period : std::chrono::milliseconds(1));
    timer.async_wait([self = shared_from_this(), on_ready, generation](error_code ec) {
      ((*self).*on_ready)(generation, false, ec);
    });
    return;
  }
  interest = {waiter, plan.kind == wait_plan::writable ? fd_waiter::write : fd_waiter::read};
  waiter->add_interest(interest.direction); // calls on_fd_ready once ready
}

// --- receive ---

void raw_socket_core::start_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                                    raw_receive_operation&& pending) {
  error_code ec;
  if (closed_)
    ec = asio::error::bad_descriptor;
  else if (receive_.active)
    ec = asio::error::already_started;
  else if (max_packets == 0)
    ec = asio::error::invalid_argument;
  if (ec) {
    pending.complete(executor_, from::user_call, ec, receive_batch());
    return;
  }
  begin(receive_, std::move(pending), operation_kind::receive);
  receive_max_ = max_packets;
  receive_poll_only_ = timeout <= std::chrono::nanoseconds::zero();
  const auto generation = receive_.generation;
  auto self = shared_from_this();
  // The deadline timer is only armed when the operation has to wait: under load, frames are
  // ready at once and a timer would cost two timerfd updates per batch.
  receive_has_deadline_ = !receive_poll_only_ && timeout < longest_timeout;
  receive_deadline_armed_ = false;
  if (receive_has_deadline_)
    receive_deadline_time_ = std::chrono::steady_clock::now() + timeout;
  // The first look at the ring also runs from the executor: the handler is never invoked
  // inside the initiating function.
  asio::post(executor_, [self, generation] { self->receive_step(generation); });
}

void raw_socket_core::receive_step(std::uint64_t generation) {
  if (!receive_.active || generation != receive_.generation)
    return;
  if (receive_.cancel_requested)
    return finish_receive(asio::error::operation_aborted, 0);
  for (int attempt = 0;; ++attempt) {
    error_code ec;
    receive_storage_.resize(receive_max_);
    const std::size_t n = backend_->poll_receive(receive_storage_, ec);
    if (n > 0 || ec)
      return finish_receive(ec, n);
    if (receive_poll_only_)
      return finish_receive(asio::error::timed_out, 0);
    wait_plan plan = backend_->receive_wait_plan(ec);
    if (ec)
      return finish_receive(ec, 0);
    if (plan.kind == wait_plan::retry && attempt < 4)
      continue;
    if (plan.kind == wait_plan::retry || plan.kind == wait_plan::none)
      plan = {wait_plan::readable, backend_->receive_fd(), {}};
    if (receive_has_deadline_ && !receive_deadline_armed_) {
      receive_deadline_armed_ = true;
      receive_deadline_.expires_at(receive_deadline_time_);
      receive_deadline_.async_wait([self = shared_from_this(), generation](error_code ec) {
        self->on_receive_deadline(generation, ec);
      });
    }
    receive_waiting_ = true;
    wait(plan, receive_interest_, receive_timer_, &raw_socket_core::on_receive_wait, generation);
    return;
  }
}

void raw_socket_core::on_receive_wait(std::uint64_t generation, bool from_fd, error_code ec) {
  if (!receive_.active || generation != receive_.generation)
    return;
  receive_waiting_ = false;
  if (ec == asio::error::operation_aborted) {
    if (receive_.cancel_requested)
      finish_receive(ec, 0);
    return;
  }
  if (ec)
    return finish_receive(ec, 0);
  if (from_fd)
    backend_->on_receive_ready();
  receive_step(generation);
}

void raw_socket_core::on_receive_deadline(std::uint64_t generation, error_code ec) {
  if (ec || !receive_.active || generation != receive_.generation)
    return;
  // Frames that arrived just before the deadline are still delivered.
  receive_storage_.resize(receive_max_);
  const std::size_t n = backend_->poll_receive(receive_storage_, ec);
  finish_receive(n > 0 || ec ? ec : error_code(asio::error::timed_out), n);
}

void raw_socket_core::finish_receive(error_code ec, std::size_t n, from origin) {
  receive_batch batch;
  receive_storage_.resize(n);
  if (n > 0) {
    batch.owner_ = shared_from_this();
    batch.packets_ = std::move(receive_storage_);
    receive_storage_ = {};
    lent_received_ += n;
  }
  if (receive_waiting_) {
    withdraw(receive_interest_);
    receive_timer_.cancel();
    receive_waiting_ = false;
  }
  if (receive_deadline_armed_) {
    receive_deadline_.cancel();
    receive_deadline_armed_ = false;
  }
  finish(receive_, origin, ec, std::move(batch));
}

void raw_socket_core::release_received(std::vector<received_packet>& packets) noexcept {
  backend_->release(packets);
  lent_received_ -= packets.size();
  packets.clear();
  if (receive_storage_.capacity() < packets.capacity())
    receive_storage_.swap(packets);
}

// --- send side ---

void raw_socket_core::start_acquire(std::size_t n, raw_acquire_operation&& pending) {
  error_code ec;
  if (closed_)
    ec = asio::error::bad_descriptor;
  else if (acquire_.active)
    ec = asio::error::already_started;
  else if (n == 0)
    ec = asio::error::invalid_argument;
  if (ec) {
    pending.complete(executor_, from::user_call, ec, send_batch());
    return;
  }
  begin(acquire_, std::move(pending), operation_kind::acquire);
  acquire_count_ = n;
  asio::post(executor_, [self = shared_from_this()] { self->tx_step(); });
}

void raw_socket_core::start_send(send_batch batch, raw_send_operation&& pending) {
  error_code ec;
  if (closed_)
    ec = asio::error::bad_descriptor;
  else if (send_.active)
    ec = asio::error::already_started;
  else if (!batch.empty() && batch.owner_.get() != this)
    ec = asio::error::invalid_argument; // buffers of another socket
  else
    for (const auto& packet : batch)
      if (packet.length < 14 || packet.length > packet.buffer().size())
        ec = asio::error::invalid_argument;
  if (ec) {
    // The batch's buffers go back unsent when it is destroyed here.
    pending.complete(executor_, from::user_call, ec);
    return;
  }
  begin(send_, std::move(pending), operation_kind::send);
  send_packets_.swap(batch.packets_);
  batch.owner_.reset(); // the packets are the operation's now (still counted as lent)
  send_next_ = 0;
  asio::post(executor_, [self = shared_from_this()] { self->tx_step(); });
}

void raw_socket_core::start_flush(raw_send_operation&& pending) {
  error_code ec;
  if (closed_)
    ec = asio::error::bad_descriptor;
  else if (flush_.active)
    ec = asio::error::already_started;
  if (ec) {
    pending.complete(executor_, from::user_call, ec);
    return;
  }
  begin(flush_, std::move(pending), operation_kind::flush);
  asio::post(executor_, [self = shared_from_this()] { self->tx_step(); });
}

void raw_socket_core::tx_step() {
  // Handlers run inline from here (dispatch) and may start, cancel or close: state is re-read
  // after every completion.
  for (int round = 0; round < 8 && !closed_; ++round) {
    if (send_.active && send_.cancel_requested)
      finish_send(asio::error::operation_aborted);
    if (acquire_.active && acquire_.cancel_requested && !closed_)
      finish_acquire(asio::error::operation_aborted, 0);
    if (flush_.active && flush_.cancel_requested && !closed_)
      finish_flush(asio::error::operation_aborted);
    if (closed_)
      return;

    error_code ec;
    backend_->poll_sent(ec); // reap completions: frees buffers for acquire
    if (ec)
      tx_error_ = ec;

    bool blocked = false;
    if (send_.active) {
      const auto rest = std::span<const send_packet>(send_packets_).subspan(send_next_);
      const std::size_t posted = backend_->post(rest, ec);
      send_next_ += posted;
      lent_send_ -= posted;
      if (ec)
        finish_send(ec);
      else if (send_next_ == send_packets_.size())
        finish_send(std::exchange(tx_error_, {}));
      else
        blocked = true;
      if (closed_)
        return;
    }
    if (acquire_.active) {
      acquire_storage_.resize(acquire_count_);
      const std::size_t n = backend_->acquire(acquire_storage_);
      if (n > 0)
        finish_acquire({}, n);
      if (closed_)
        return;
    }
    if (flush_.active && !send_.active) {
      const bool idle = backend_->poll_sent(ec);
      if (ec || tx_error_)
        finish_flush(ec ? ec : std::exchange(tx_error_, {}));
      else if (idle)
        finish_flush({});
      if (closed_)
        return;
    }
    if (!send_.active && !acquire_.active && !flush_.active)
      return;
    if (tx_waiting_)
      return; // that wait calls tx_step again
    const bool waiting_for_buffers = acquire_.active;
    const wait_plan plan =
        backend_->send_wait_plan(blocked && send_.active, flush_.active || waiting_for_buffers, ec);
    if (ec)
      return fail_tx(ec);
    if (plan.kind == wait_plan::retry)
      continue;
    if (plan.kind == wait_plan::none)
      return; // an acquire waits for the user to return buffers
    tx_waiting_ = true;
    wait(plan, tx_interest_, tx_timer_, &raw_socket_core::on_tx_wait, 0);
    return;
  }
  if (!closed_ && !tx_waiting_ && (send_.active || acquire_.active || flush_.active))
    asio::post(executor_, [self = shared_from_this()] { self->tx_step(); });
}

void raw_socket_core::on_tx_wait(std::uint64_t, bool from_fd, error_code ec) {
  tx_waiting_ = false;
  if (closed_)
    return;
  if (ec && ec != asio::error::operation_aborted)
    return fail_tx(ec);
  if (from_fd && !ec)
    backend_->on_send_ready();
  tx_step();
}

void raw_socket_core::fail_tx(error_code ec) {
  if (send_.active)
    finish_send(ec);
  if (acquire_.active && !closed_)
    finish_acquire(ec, 0);
  if (flush_.active && !closed_)
    finish_flush(ec);
}

void raw_socket_core::finish_acquire(error_code ec, std::size_t n, from origin) {
  send_batch batch;
  acquire_storage_.resize(n);
  if (n > 0) {
    batch.owner_ = shared_from_this();
    batch.packets_ = std::move(acquire_storage_);
    acquire_storage_ = {};
    lent_send_ += n;
  }
  finish(acquire_, origin, ec, std::move(batch));
}

void raw_socket_core::finish_send(error_code ec, from origin) {
  const auto unsent = std::span<const send_packet>(send_packets_).subspan(send_next_);
  backend_->give_back(unsent);
  lent_send_ -= unsent.size();
  send_packets_.clear();
  if (acquire_storage_.capacity() < send_packets_.capacity())
    acquire_storage_.swap(send_packets_);
  send_next_ = 0;
  finish(send_, origin, ec);
}

void raw_socket_core::finish_flush(error_code ec, from origin) {
  finish(flush_, origin, ec);
}

void raw_socket_core::return_send_buffers(std::span<const send_packet> packets) noexcept {
  backend_->give_back(packets);
  lent_send_ -= packets.size();
  if (acquire_.active && !closed_)
    asio::post(executor_, [self = shared_from_this()] { self->tx_step(); });
}

} // namespace asio_rdma::detail
