#include "connection_impl.hpp"

#include "endpoint.hpp"
#include "handler_completion.hpp"
#include "qp_timers.hpp"
#include "shared_queues_impl.hpp"
#include "verbs_error.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>

namespace asio_rdma::detail {

namespace {

// rdma_cm's reject reason when the peer's application called rdma_reject
// (IB_CM_REJ_CONSUMER_DEFINED); any other reason means nobody listened.
constexpr int reject_reason_consumer = 28;

// rdma_cm says ENODEV when no RDMA device serves an address or its route.
error_code cm_error(error_code ec) {
  return ec == boost::system::errc::no_such_device ? error_code(errc::no_device) : ec;
}

int timeout_ms(std::chrono::milliseconds t) {
  return static_cast<int>(std::clamp<std::int64_t>(t.count(), 1, 60 * 60 * 1000));
}

// Cancels one queued operation through the Asio cancellation slot.
struct op_canceller {
  connection_impl* impl;
  operation* op;
  void operator()(asio::cancellation_type type);
};

} // namespace

connection_impl::connection_impl(const asio::any_io_executor& ex, const connection_options& options)
    : ex_(ex), options_(options), timer_(ex), drain_timer_(ex), keepalive_timer_(ex) {}

connection_impl::~connection_impl() {
  if (channel_interest_) // the channel may be shared with an acceptor
    channel_->remove_interest();
  if (cq_interest_)
    cq_->remove_interest();
  teardown();
}

// ---------------------------------------------------------------- establishment

void connection_impl::start_connect(std::string host, std::uint16_t port,
                                    connection_handler handler) {
  assign_handler(establish_handler_, std::move(handler));
  self_ = shared_from_this();
  op_started();
  if (options_.validate(connection_options::max_connect_private_data))
    return fail_establishment(errc::invalid_option, true);
  auto slot = asio::get_associated_cancellation_slot(establish_handler_);
  if (slot.is_connected())
    slot.assign([this](asio::cancellation_type) {
      fail_establishment(asio::error::operation_aborted, true);
    });

  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec)
    return resolve_address(asio::ip::tcp::endpoint(address, port));
  // A host name: resolve it with Asio's resolver, then continue with rdma_cm.
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(ex_);
  state_ = state::resolving;
  start_timer(false);
  resolver->async_resolve(host, std::to_string(port), asio::ip::resolver_base::numeric_service,
                          [self = shared_from_this(),
                           resolver](error_code ec, asio::ip::tcp::resolver::results_type results) {
                            if (!self->establish_handler_)
                              return; // timed out or cancelled meanwhile
                            if (!ec && results.empty())
                              ec = asio::error::host_not_found;
                            if (ec)
                              return self->fail_establishment(ec, false);
                            self->resolve_address(results.begin()->endpoint());
                          });
}

void connection_impl::resolve_address(const asio::ip::tcp::endpoint& destination) {
  error_code ec;
  channel_ = cm_channel::create(ex_, ec);
  if (!ec)
    id_ = channel_->create_id(this, RDMA_PS_TCP, ec);
  if (!ec)
    ec = set_ack_timeout();
  if (ec)
    return fail_establishment(cm_error(ec), true);
  sync_interest();
  sockaddr_storage dst{}, src{};
  to_sockaddr(destination, dst);
  sockaddr* src_ptr = nullptr;
  if (!options_.source_address.empty()) {
    auto source = asio::ip::make_address(options_.source_address, ec);
    if (ec)
      return fail_establishment(ec, true);
    to_sockaddr(asio::ip::tcp::endpoint(source, 0), src);
    src_ptr = reinterpret_cast<sockaddr*>(&src);
  }
  if (state_ != state::resolving) {
    state_ = state::resolving;
    start_timer(false);
  }
  if (::rdma_resolve_addr(id_.get(), src_ptr, reinterpret_cast<sockaddr*>(&dst),
                          timeout_ms(options_.timeout)) != 0) {
    return fail_establishment(cm_error(from_errno()), true);
  }
}

void connection_impl::start_accept(std::shared_ptr<cm_channel> channel, cm_id_ptr id,
                                   const cm_event& request, connection_handler handler) {
  assign_handler(establish_handler_, std::move(handler));
  self_ = shared_from_this();
  op_started();
  channel_ = std::move(channel);
  id_ = std::move(id);
  sync_interest();
  id_->context = static_cast<cm_event_target*>(this);
  auto data = request.data();
  peer_private_data_.assign(data.begin(), data.end());
  if (options_.validate(connection_options::max_accept_private_data))
    return fail_establishment(errc::invalid_option, true);
  if (auto ec = set_ack_timeout(); ec || (ec = create_resources(id_->verbs)))
    return fail_establishment(ec, true);
  rdma_conn_param param{};
  param.private_data = options_.private_data.data();
  param.private_data_len = static_cast<std::uint8_t>(options_.private_data.size());
  // Reads and atomics the peer may have outstanding towards us, and we towards it.
  param.responder_resources = std::min<int>(
      {options_.responder_resources, request.initiator_depth, device_->attributes.max_qp_rd_atom});
  param.initiator_depth = std::min<int>({options_.initiator_depth, request.responder_resources,
                                         device_->attributes.max_qp_init_rd_atom});
  param.rnr_retry_count = 7; // 7 = retry forever: RNR is our flow control
  param.retry_count = options_.retry_count;
  auto slot = asio::get_associated_cancellation_slot(establish_handler_);
  if (slot.is_connected())
    slot.assign([this](asio::cancellation_type) {
      fail_establishment(asio::error::operation_aborted, true);
    });
  state_ = state::accepting;
  start_timer(false);
  if (::rdma_accept(id_.get(), &param) != 0)
    return fail_establishment(from_errno(), true);
  // rdma_accept moved the queue pair to RTS: the peer may send from now on.
  if (auto ec = set_rnr_timer())
    return fail_establishment(ec, true);
}

error_code connection_impl::set_ack_timeout() {
  std::uint8_t exponent = options_.ack_timeout_exponent;
  if (::rdma_set_option(id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent,
                        sizeof exponent) != 0)
    return from_errno();
  return {};
}

error_code connection_impl::set_rnr_timer() {
  // rdma_cm's RTR transition leaves min_rnr_timer at 0, which encodes the
  // longest delay (655 ms): a sender that finds our receive queue empty would
  // sleep that long. RTS -> RTS may change it.
  ibv_qp_attr attr{};
  attr.min_rnr_timer = rnr_timer_code(options_.rnr_retry_delay);
  if (int rc = ::ibv_modify_qp(qp_, &attr, IBV_QP_MIN_RNR_TIMER))
    return from_returned_errno(rc);
  return {};
}

error_code connection_impl::create_resources(ibv_context* context) {
  error_code ec;
  device_ = get_device(context, ec);
  if (ec)
    return ec;
  const auto send_depth = options_.send_queue_depth;
  auto recv_depth = options_.receive_queue_depth;
  if (options_.shared_queues) {
    // Shared CQ and SRQ: receive buffers and completion mode are the shared ones.
    shared_ = options_.shared_queues.impl();
    if ((ec = shared_->bind(device_)))
      return ec;
    cq_ = shared_->cq();
    receives_ = &shared_->ring();
    recv_depth = receives_->depth();
  } else {
    cq_ = completion_queue::create(ex_, context, static_cast<int>(send_depth + recv_depth), ec);
    if (ec)
      return ec;
    cq_->set_batch_listener({&connection_impl::after_cq_batch, this});
    cq_->set_owner(weak_from_this());
    cq_->set_mode(options_.completion_mode, options_.adaptive_spin);
    if ((ec = own_receives_.init(pd(), recv_depth, options_.max_message_size,
                                 &connection_impl::on_receive_complete, this)))
      return ec;
  }
  sync_interest();
  if ((ec = send_block_.allocate(pd(), send_depth, options_.max_message_size, 0)))
    return ec;
  if ((ec =
           atomic_block_.allocate(pd(), send_depth, sizeof(std::uint64_t), IBV_ACCESS_LOCAL_WRITE)))
    return ec;

  ibv_qp_init_attr attr{};
  attr.send_cq = cq_->native();
  attr.recv_cq = cq_->native();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = send_depth;
  attr.cap.max_recv_wr = shared_ ? 0 : recv_depth;
  attr.srq = shared_ ? shared_->srq() : nullptr;
  attr.cap.max_send_sge = options_.max_send_sge;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = options_.max_inline_data;
  if ((ec = create_qp(attr))) {
    // Some devices refuse inline data: fall back to copying every send.
    attr.cap.max_inline_data = 0;
    if (options_.max_inline_data == 0 || (ec = create_qp(attr)))
      return ec;
  }
  qp_created_ = true;
  if (shared_)
    shared_->add(qp_->qp_num, this);
  inline_limit_ = std::min(attr.cap.max_inline_data, options_.max_inline_data);
  max_send_sge_ = attr.cap.max_send_sge;

  arrived_.resize(recv_depth);
  free_send_slots_.reserve(send_depth);
  for (std::uint32_t i = send_depth; i > 0; --i)
    free_send_slots_.push_back(i - 1);
  // Receives must be posted before the peer can send: before connect/accept.
  flush();
  return shared_ ? error_code() : cq_->start();
}

error_code connection_impl::create_qp(ibv_qp_init_attr& attr) {
  if (out_of_band_)
    return create_out_of_band_qp(attr); // out_of_band.cpp
  if (::rdma_create_qp(id_.get(), pd(), &attr) != 0)
    return from_errno();
  qp_ = id_->qp;
  return {};
}

void connection_impl::on_cm_event(const cm_event& event) {
  // Handlers run from here may drop the user's last reference.
  auto keep_alive = shared_from_this();
  switch (event.type) {
  case RDMA_CM_EVENT_ADDR_RESOLVED:
    if (state_ == state::resolving &&
        ::rdma_resolve_route(id_.get(), timeout_ms(options_.timeout)) != 0)
      fail_establishment(cm_error(from_errno()), false);
    break;
  case RDMA_CM_EVENT_ADDR_ERROR:
    fail_establishment(errc::address_resolution_failed, false);
    break;
  case RDMA_CM_EVENT_ROUTE_RESOLVED: {
    if (state_ != state::resolving)
      break;
    if (auto ec = create_resources(id_->verbs))
      return fail_establishment(ec, false);
    rdma_conn_param param{};
    param.private_data = options_.private_data.data();
    param.private_data_len = static_cast<std::uint8_t>(options_.private_data.size());
    param.responder_resources =
        std::min<int>(options_.responder_resources, device_->attributes.max_qp_rd_atom);
    param.initiator_depth =
        std::min<int>(options_.initiator_depth, device_->attributes.max_qp_init_rd_atom);
    param.rnr_retry_count = 7;
    param.retry_count = options_.retry_count;
    state_ = state::connecting;
    if (::rdma_connect(id_.get(), &param) != 0)
      fail_establishment(from_errno(), false);
    break;
  }
  case RDMA_CM_EVENT_ROUTE_ERROR:
    fail_establishment(errc::route_resolution_failed, false);
    break;
  case RDMA_CM_EVENT_UNREACHABLE:
    fail_establishment(errc::unreachable, false);
    break;
  case RDMA_CM_EVENT_REJECTED: {
    auto data = event.data();
    peer_private_data_.assign(data.begin(), data.end());
    fail_establishment(event.status == reject_reason_consumer
                           ? error_code(errc::rejected)
                           : error_code(asio::error::connection_refused),
                       false);
    break;
  }
  case RDMA_CM_EVENT_CONNECT_ERROR:
    fail_establishment(errc::connection_error, false);
    break;
  case RDMA_CM_EVENT_ESTABLISHED:
    finish_establishment(event);
    break;
  case RDMA_CM_EVENT_DISCONNECTED:
    if (establish_handler_) {
      fail_establishment(asio::error::connection_reset, false);
    } else if (state_ == state::open) {
      peer_disconnected_ = true;
      // Deliver every message that arrived before the disconnect first.
      if (cq_)
        cq_->poll();
      begin_close({});
    } else {
      complete_disconnect({}); // our own disconnect finished (or was already drained)
    }
    break;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    if (establish_handler_)
      fail_establishment(errc::device_removed, false);
    else
      begin_close(errc::device_removed);
    break;
  default:
    break; // TIMEWAIT_EXIT and others need no action
  }
}

void connection_impl::finish_establishment(const cm_event& event) {
  if (!establish_handler_)
    return;
  timer_.cancel();
  if (state_ == state::connecting) { // the acceptor's reply carries its private data
    auto data = event.data();
    peer_private_data_.assign(data.begin(), data.end());
  }
  if (state_ == state::connecting) {
    // The queue pair reached RTS while rdma_cm processed the reply.
    if (auto ec = set_rnr_timer())
      return fail_establishment(ec, false);
  }
  state_ = state::open;
  op_finished();
  sync_interest();
  start_keepalive();
  auto handler = std::move(establish_handler_);
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected())
    slot.clear();
  dispatch_handler(ex_, std::move(handler), error_code(), connection(shared_from_this()));
}

void connection_impl::fail_establishment(error_code ec, bool defer) {
  if (!establish_handler_)
    return;
  timer_.cancel();
  auto handler = std::move(establish_handler_);
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected())
    slot.clear();
  // Keep the implementation for the rejection's private data; otherwise hand
  // back a connection that is not open.
  connection result = ec == errc::rejected ? connection(shared_from_this()) : connection();
  op_finished();
  teardown();
  state_ = state::closed;
  auto keep = std::move(self_);
  if (defer)
    post_handler(ex_, std::move(handler), ec, std::move(result));
  else
    dispatch_handler(ex_, std::move(handler), ec, std::move(result));
}

void connection_impl::start_timer(bool for_disconnect) {
  timer_.expires_after(options_.timeout);
  timer_.async_wait([self = shared_from_this(), for_disconnect](const error_code& ec) {
    if (ec)
      return;
    if (for_disconnect)
      self->complete_disconnect(asio::error::timed_out);
    else
      self->fail_establishment(asio::error::timed_out, false);
  });
}

// ---------------------------------------------------------------- keepalive

void connection_impl::start_keepalive() {
  if (options_.keepalive_interval.count() == 0 || state_ != state::open)
    return;
  keepalive_timer_.expires_after(options_.keepalive_interval);
  keepalive_timer_.async_wait([weak = weak_from_this()](const error_code& ec) {
    if (auto self = weak.lock(); self && !ec)
      self->keepalive_tick();
  });
}

void connection_impl::keepalive_tick() {
  if (state_ != state::open)
    return;
  // Posted user work is bounded by the transport's retries; while it waits,
  // a living but slow receiver may hold it by RNR for as long as it likes.
  const bool user_work_posted = send_outstanding_ > (probe_outstanding_ ? 1u : 0u);
  if (activity_ != activity_at_last_tick_ || user_work_posted)
    silent_intervals_ = 0;
  else if (++silent_intervals_ >= options_.keepalive_count)
    return begin_close(asio::error::timed_out);
  activity_at_last_tick_ = activity_;
  if (silent_intervals_ > 0 && !probe_outstanding_ && send_outstanding_ == 0) {
    // A zero-length RDMA write: acknowledged by the peer's transport, it needs
    // no receive buffer, no memory and no rkey there (IBTA C9-88).
    work_request probe;
    probe.op = work_request::kind::write;
    probe_outstanding_ = true;
    work(
        probe,
        [weak = weak_from_this()](error_code, std::size_t) {
          if (auto self = weak.lock())
            self->probe_outstanding_ = false;
        },
        true);
  }
  start_keepalive();
}

// ---------------------------------------------------------------- data path

void connection_impl::send(const const_buffer_array& buffers,
                           std::optional<std::uint32_t> immediate, size_handler handler,
                           bool direct) {
  error_code ec;
  if (buffers.too_many)
    ec = asio::error::invalid_argument;
  else if (buffers.total_size > options_.max_message_size)
    ec = errc::message_too_large;
  else if (state_ != state::open)
    ec = terminal_error(false);
  operation* op = new_op(op_kind::send, direct);
  assign_handler(op->handler, std::move(handler));
  if (ec)
    return complete(op, ec, 0, true);
  op->on_complete = &connection_impl::on_send_complete;
  op->source = buffers;
  op->length = buffers.total_size;
  op->immediate = immediate;
  if (op->length <= op->small.size()) {
    // Copy small messages now: cheap, and the caller's buffer is free at once.
    std::byte* dst = op->small.data();
    for (std::size_t i = 0; i < buffers.count; ++i) {
      std::memcpy(dst, buffers.buffers[i].data(), buffers.buffers[i].size());
      dst += buffers.buffers[i].size();
    }
    op->source.buffers[0] = asio::const_buffer(op->small.data(), op->length);
    op->source.count = op->length > 0 ? 1 : 0;
  }
  queue_send(op);
}

void connection_impl::work(const work_request& request, size_handler handler, bool direct) {
  error_code ec = state_ != state::open ? terminal_error(false) : check_work(request);
  operation* op = new_op(op_kind::work, direct);
  assign_handler(op->handler, std::move(handler));
  if (ec)
    return complete(op, ec, 0, true);
  op->on_complete = &connection_impl::on_send_complete;
  prepare_work(op, request);
  queue_send(op);
}

operation* connection_impl::new_op(op_kind kind, bool direct) {
  operation* op = op_pool_.get();
  op->direct = direct;
  op->owner = this;
  op->kind = kind;
  op->posted = false;
  op->counted = false;
  op->atomic = false;
  op->wants_message = false;
  op->immediate.reset();
  op->send_slot = operation::no_slot;
  op->length = 0;
  return op;
}

void connection_impl::queue_send(operation* op) {
  op->counted = true;
  op_started();
  pending_sends_.push(op);
  auto slot = asio::get_associated_cancellation_slot(op->handler);
  if (slot.is_connected())
    slot.template emplace<op_canceller>(op_canceller{this, op});
  // An idle send queue rings the doorbell at once (latency); otherwise the
  // request joins the batch flushed at the end of this io_context turn.
  if (send_outstanding_ == 0 && !flush_scheduled_)
    flush();
  else
    schedule_flush();
}

error_code connection_impl::check_work(const work_request& r) const {
  using kind = work_request::kind;
  if (r.too_many || r.count > max_send_sge_)
    return asio::error::invalid_argument; // more scatter/gather entries than the QP takes
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < r.count; ++i) {
    if (!r.local[i].in_bounds)
      return errc::out_of_bounds;
    total += r.local[i].length;
  }
  switch (r.op) {
  case kind::send:
    return total > options_.max_message_size ? error_code(errc::message_too_large) : error_code();
  case kind::write:
  case kind::read:
    return total > r.remote.length ? error_code(errc::out_of_bounds) : error_code();
  case kind::fetch_add:
  case kind::compare_swap:
    if (r.remote.address % 8 != 0)
      return errc::misaligned;
    return r.remote.length < 8 ? error_code(errc::out_of_bounds) : error_code();
  }
  return {};
}

void connection_impl::prepare_work(operation* op, const work_request& r) {
  using kind = work_request::kind;
  ibv_send_wr& wr = op->wr;
  wr = {};
  wr.wr_id = op->wr_id();
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = op->sge;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < r.count; ++i) {
    op->sge[i] = {reinterpret_cast<std::uintptr_t>(r.local[i].data), r.local[i].length,
                  r.local[i].lkey};
    total += r.local[i].length;
  }
  wr.num_sge = static_cast<int>(r.count);
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
}

void connection_impl::receive(const mutable_buffer_array& buffers, size_handler handler,
                              bool direct) {
  operation* op = new_receive(buffers, direct);
  assign_handler(op->handler, std::move(handler));
  start_receive(op);
}

void connection_impl::receive_message(const mutable_buffer_array& buffers, message_handler handler,
                                      bool direct) {
  operation* op = new_receive(buffers, direct);
  op->wants_message = true;
  assign_handler(op->message_handler_, std::move(handler));
  start_receive(op);
}

operation* connection_impl::new_receive(const mutable_buffer_array& buffers, bool direct) {
  operation* op = new_op(op_kind::receive, direct);
  op->destination = buffers;
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

void op_canceller::operator()(asio::cancellation_type) {
  impl->cancel(op);
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
  auto buffer = make_buffer_array<asio::mutable_buffer>(asio::buffer(wait->bytes));
  receive(buffer,
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

void connection_impl::cancel(operation* op) {
  bool removed = op->kind == op_kind::receive ? waiting_receives_.remove(op)
                                              : (!op->posted && pending_sends_.remove(op));
  if (removed)
    complete(op, asio::error::operation_aborted, 0, true);
}

void connection_impl::schedule_flush() {
  if (flush_scheduled_)
    return;
  flush_scheduled_ = true;
  asio::post(ex_, [self = shared_from_this()] { self->flush(); });
}

void connection_impl::after_cq_batch(void* context) {
  auto* self = static_cast<connection_impl*>(context);
  if (self->has_unposted_work())
    self->flush();
  if (self->interest_sync_pending_) {
    self->interest_sync_pending_ = false;
    self->sync_interest();
  }
}

void connection_impl::flush() {
  flush_scheduled_ = false;
  if (!qp_created_)
    return;
  ibv_qp* qp = qp_;

  // Receives: one chained post for every buffer freed since the last flush.
  if (receives_->has_released() && !shared_) {
    if (state_ == state::closing || state_ == state::closed)
      receives_->forget_released();
    else if (auto ec = receives_->post_to(qp))
      return begin_close(ec);
  }

  // Sends: as many queued requests as the send queue has room for, chained.
  ibv_send_wr* first = nullptr;
  ibv_send_wr* last = nullptr;
  while (!pending_sends_.empty() && send_outstanding_ < options_.send_queue_depth) {
    operation* op = pending_sends_.pop();
    op->posted = true;
    auto cancel_slot = asio::get_associated_cancellation_slot(op->handler);
    if (cancel_slot.is_connected())
      cancel_slot.clear(); // posted RC work cannot be withdrawn alone
    if (op->kind == op_kind::send) {
      prepare_send(op);
    } else if (op->atomic) {
      op->send_slot = free_send_slots_.back();
      free_send_slots_.pop_back();
      op->sge[0] = {reinterpret_cast<std::uintptr_t>(atomic_block_.slot(op->send_slot)),
                    sizeof(std::uint64_t), atomic_block_.mr->lkey};
    }
    // Selective signalling: one completion per signal_interval requests;
    // RC completes in order, so a completion also completes the requests
    // before it (errors are always reported, signalled or not).
    op->wr.send_flags &= ~unsigned(IBV_SEND_SIGNALED);
    if (++unsignaled_ >= signal_interval) {
      op->wr.send_flags |= IBV_SEND_SIGNALED;
      unsignaled_ = 0;
      ++statistics_.signaled;
    }
    ++statistics_.work_requests;
    if (last)
      last->next = &op->wr;
    else
      first = &op->wr;
    last = &op->wr;
    ++send_outstanding_;
    posted_sends_.push(op);
  }
  if (!first)
    return;
  if (!(last->send_flags & IBV_SEND_SIGNALED)) {
    last->send_flags |= IBV_SEND_SIGNALED; // nothing may wait on a later request
    ++statistics_.signaled;
  }
  unsignaled_ = 0;
  ++statistics_.posts;
  ibv_send_wr* bad = nullptr;
  if (int rc = ::ibv_post_send(qp, first, &bad)) {
    // Requests from `bad` on were not posted: they are the tail of posted_sends_.
    auto ec = from_returned_errno(rc);
    std::size_t unposted = 0;
    for (ibv_send_wr* wr = bad; wr; wr = wr->next)
      ++unposted;
    posted_sends_.drop_tail(unposted, [&](operation* op) {
      --send_outstanding_;
      release_send_slot(op);
      complete(op, ec, 0, true);
    });
    begin_close(ec);
  }
}

void connection_impl::prepare_send(operation* op) {
  ibv_send_wr& wr = op->wr;
  wr = {};
  wr.wr_id = op->wr_id();
  wr.opcode = op->immediate ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  if (op->immediate)
    wr.imm_data = htonl(*op->immediate);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = op->sge;
  op->send_slot = operation::no_slot;
  const auto& src = op->source;
  if (op->length == 0) {
    wr.num_sge = 0;
  } else if (op->length <= inline_limit_ && src.count <= max_send_sge_) {
    // Inline: the device copies from the user's memory at post time, so no
    // registration is needed and the buffers are free once posted.
    for (std::size_t i = 0; i < src.count; ++i)
      op->sge[i] = {reinterpret_cast<std::uintptr_t>(src.buffers[i].data()),
                    static_cast<std::uint32_t>(src.buffers[i].size()), 0};
    wr.num_sge = static_cast<int>(src.count);
    wr.send_flags |= IBV_SEND_INLINE;
    ++statistics_.inline_sends;
  } else {
    op->send_slot = free_send_slots_.back();
    free_send_slots_.pop_back();
    std::byte* dst = send_block_.slot(op->send_slot);
    for (std::size_t i = 0; i < src.count; ++i) {
      std::memcpy(dst, src.buffers[i].data(), src.buffers[i].size());
      dst += src.buffers[i].size();
    }
    op->sge[0] = {reinterpret_cast<std::uintptr_t>(send_block_.slot(op->send_slot)),
                  static_cast<std::uint32_t>(op->length), send_block_.mr->lkey};
    wr.num_sge = 1;
  }
}

void connection_impl::release_send_slot(operation* op) {
  if (op->send_slot != operation::no_slot) {
    free_send_slots_.push_back(op->send_slot);
    op->send_slot = operation::no_slot;
  }
}

void connection_impl::on_send_complete(completion_target* target, const ibv_wc& wc) {
  auto* op = static_cast<operation*>(target);
  connection_impl* self = op->owner;
  ++self->activity_;
  // A shared CQ does not keep this connection alive through the batch.
  std::shared_ptr<connection_impl> keep_alive;
  if (self->shared_)
    keep_alive = self->shared_from_this();
  // Unsignalled requests posted before this one have completed successfully.
  while (self->posted_sends_.front() && self->posted_sends_.front() != op)
    self->finish_posted(self->posted_sends_.pop(), IBV_WC_SUCCESS);
  self->posted_sends_.remove(op);
  self->finish_posted(op, wc.status);
  if (self->shared_ && !self->pending_sends_.empty())
    self->schedule_flush(); // no per-connection batch end on a shared CQ
  self->maybe_finish_close();
}

void connection_impl::finish_posted(operation* op, ibv_wc_status status) {
  --send_outstanding_;
  std::uint64_t value = op->length;
  if (op->atomic && status == IBV_WC_SUCCESS)
    std::memcpy(&value, atomic_block_.slot(op->send_slot), sizeof value);
  release_send_slot(op);
  error_code ec;
  if (status == IBV_WC_WR_FLUSH_ERR) {
    ec = failure_ ? failure_ : error_code(asio::error::operation_aborted);
  } else if (status != IBV_WC_SUCCESS) {
    ec = make_wc_error(status);
    begin_close(ec);
  }
  complete(op, ec, ec ? 0 : value, false);
}

void connection_impl::on_receive_complete(completion_target* target, const ibv_wc& wc) {
  auto* slot = static_cast<receive_slot*>(target);
  auto* self = static_cast<connection_impl*>(slot->owner);
  self->receives_->completed();
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

void connection_impl::complete(operation* op, error_code ec, std::size_t bytes, bool defer,
                               const received_message* message) {
  const bool counted = op->counted;
  // From the completion path (never an initiating function), a handler that
  // runs on this executor is called directly, as Asio's own operations do.
  const bool direct = op->direct && !defer;
  if (op->wants_message) {
    auto handler = std::move(op->message_handler_);
    op_pool_.put(op);
    if (counted)
      op_finished();
    received_message result = message ? *message : received_message();
    if (direct)
      std::move(handler)(ec, result);
    else if (defer)
      post_handler(ex_, std::move(handler), ec, result);
    else
      dispatch_handler(ex_, std::move(handler), ec, result);
    return;
  }
  auto handler = std::move(op->handler);
  op_pool_.put(op);
  if (counted)
    op_finished();
  if (direct)
    std::move(handler)(ec, bytes);
  else if (defer)
    post_handler(ex_, std::move(handler), ec, bytes);
  else
    dispatch_handler(ex_, std::move(handler), ec, bytes);
}

error_code connection_impl::terminal_error(bool for_receive) const {
  if (failure_)
    return failure_;
  if (!for_receive)
    return asio::error::not_connected;
  if (closed_locally_)
    return asio::error::operation_aborted;
  if (peer_disconnected_ || disconnect_requested_)
    return asio::error::eof;
  return asio::error::not_connected;
}

// ---------------------------------------------------------------- teardown

void connection_impl::disconnect(void_handler handler) {
  if (state_ != state::open) {
    error_code ec = peer_disconnected_ ? error_code() : error_code(asio::error::not_connected);
    post_handler(ex_, std::move(handler), ec);
    return;
  }
  assign_handler(disconnect_handler_, std::move(handler));
  disconnect_requested_ = true;
  op_started();
  auto slot = asio::get_associated_cancellation_slot(disconnect_handler_);
  if (slot.is_connected())
    slot.assign(
        [this](asio::cancellation_type) { complete_disconnect(asio::error::operation_aborted); });
  start_timer(true);
  begin_close({});
}

void connection_impl::complete_disconnect(error_code ec) {
  if (!disconnect_handler_)
    return;
  timer_.cancel();
  op_finished();
  auto handler = std::move(disconnect_handler_);
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected())
    slot.clear();
  post_handler(ex_, std::move(handler), ec);
}

void connection_impl::close() noexcept {
  if (state_ == state::closed)
    return;
  if (establish_handler_)
    return fail_establishment(asio::error::operation_aborted, true);
  closed_locally_ = true;
  if (state_ == state::closing) {
    fail_waiting_receives(true);
    return;
  }
  begin_close({});
}

void connection_impl::begin_close(error_code reason) {
  // The poll below runs handlers, and one may drop the user's last reference
  // (a coroutine that ends and destroys its connection): keep this object
  // alive until the close is done. Empty only when called from the destructor.
  const auto keep_alive = weak_from_this().lock();
  if (reason && !failure_)
    failure_ = reason;
  if (state_ == state::closing || state_ == state::closed) {
    fail_waiting_receives(true);
    return;
  }
  const bool was_connected = state_ == state::open;
  state_ = state::closing;
  keepalive_timer_.cancel();
  sync_interest();
  if (qp_created_) {
    // rdma_disconnect moves the queue pair to the error state (flushing all
    // posted work) and tells the peer; without a connection, or without
    // rdma_cm (out of band: nobody to tell), do it directly.
    if (out_of_band_ || !was_connected || ::rdma_disconnect(id_.get()) != 0) {
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_ERR;
      ::ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
    }
  }
  // Work that was never posted completes now.
  while (operation* op = pending_sends_.pop())
    complete(op, failure_ ? failure_ : error_code(asio::error::operation_aborted), 0, true);
  // Messages that arrived before the error are delivered before end-of-stream.
  if (cq_)
    cq_->poll();
  fail_waiting_receives(true);
  if (state_ != state::closing)
    return; // a handler run by the poll finished the close
  if (send_outstanding_ > 0 && !shared_) {
    // Posted sends have handlers waiting for their flush; bound that wait in
    // case a device never flushes.
    drain_timer_.expires_after(std::chrono::seconds(2));
    drain_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec && self->state_ == state::closing)
        self->finish_close();
    });
  }
  maybe_finish_close();
}

void connection_impl::maybe_finish_close() {
  // Receive buffers belong to the library: destroying the queue pair is
  // enough to stop the device from using them, so only sends are awaited.
  if (state_ == state::closing && send_outstanding_ == 0)
    finish_close();
}

void connection_impl::finish_close() {
  drain_timer_.cancel();
  teardown();
  state_ = state::closed;
  // Destroying the queue pair withdrew whatever the device had not flushed.
  while (operation* op = posted_sends_.pop()) {
    --send_outstanding_;
    release_send_slot(op);
    complete(op, failure_ ? failure_ : error_code(asio::error::operation_aborted), 0, true);
  }
  fail_waiting_receives(true);
  // Out of band, no CM event follows: the flush was the whole disconnect.
  if (!disconnect_requested_ || peer_disconnected_ || out_of_band_)
    complete_disconnect({});
  auto keep = std::move(self_); // may destroy *this when the caller returns
}

void connection_impl::teardown() {
  if (cq_ && !shared_) {
    cq_->set_batch_listener({});
    cq_->stop();
  }
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
}

// ---------------------------------------------------------------- interest

void connection_impl::op_started() {
  if (user_ops_++ == 0)
    sync_interest();
}

void connection_impl::op_finished() {
  if (user_ops_ > 0 && --user_ops_ == 0) {
    // Inside a batch of our own CQ, a handler usually starts the next
    // operation at once (a ping-pong): keep waiting on the CQ until the batch
    // ends instead of dropping and re-adding the wait per operation.
    if (cq_ && !shared_ && cq_->polling() && state_ == state::open)
      interest_sync_pending_ = true;
    else
      sync_interest();
  }
}

void connection_impl::sync_interest() {
  const bool wanted = user_ops_ > 0;
  // An open connection must answer the peer's disconnect request (the CM
  // waits for our reply), so its CM events are always awaited; completions
  // only while an operation needs them.
  const bool channel_wanted = wanted || state_ == state::open;
  if (channel_ && channel_interest_ != channel_wanted) {
    channel_wanted ? channel_->add_interest() : channel_->remove_interest();
    channel_interest_ = channel_wanted;
  }
  if (cq_ && cq_interest_ != wanted) {
    wanted ? cq_->add_interest() : cq_->remove_interest();
    cq_interest_ = wanted;
  }
}

// ---------------------------------------------------------------- entry points

void start_send(connection_impl* impl, const const_buffer_array& buffers,
                std::optional<std::uint32_t> immediate, size_handler handler, bool direct) {
  impl->send(buffers, immediate, std::move(handler), direct);
}

void start_work(connection_impl* impl, const work_request& request, size_handler handler,
                bool direct) {
  impl->work(request, std::move(handler), direct);
}

void start_receive_message(connection_impl* impl, const mutable_buffer_array& buffers,
                           message_handler handler, bool direct) {
  impl->receive_message(buffers, std::move(handler), direct);
}

void start_receive_remote_buffer(connection_impl* impl, std::chrono::milliseconds timeout,
                                 remote_buffer_handler handler) {
  impl->receive_remote_buffer(timeout, std::move(handler));
}

void start_receive(connection_impl* impl, const mutable_buffer_array& buffers, size_handler handler,
                   bool direct) {
  impl->receive(buffers, std::move(handler), direct);
}

void start_disconnect(connection_impl* impl, void_handler handler) {
  impl->disconnect(std::move(handler));
}

} // namespace asio_rdma::detail
