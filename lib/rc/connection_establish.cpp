// connection_impl: establishment over rdma_cm (name resolution, address and
// route, connect/accept, the CM state machine, resource creation) and the
// keepalive.
#include "rc/connection_impl.hpp"

#include "cm/endpoint.hpp"
#include "internal_access.hpp"
#include "rc/qp_timers.hpp"
#include "rc/shared_queues_impl.hpp"
#include "trace.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <algorithm>

namespace asio_rdma::detail {

namespace {

// rdma_cm says ENODEV when no RDMA device serves an address or its route.
error_code cm_error(error_code ec) {
  return ec == boost::system::errc::no_such_device ? error_code(errc::no_device) : ec;
}

// rdma_resolve_addr refuses with EINVAL an address that no device can reach from here
// (127.0.0.1 on a machine whose only device is siw): the address itself was valid.
error_code address_error(error_code ec) {
  return ec == boost::system::errc::invalid_argument ? error_code(errc::address_resolution_failed)
                                                     : cm_error(ec);
}

// The sizes are fitted to the device before the queue pair is made: rdma_cm refusing it
// with EINVAL on the passive side (its INIT_QP_ATTR) means the request's id can no longer
// connect, its requester having given up (timed out, cancelled) since it asked. Asio's
// accept says connection_aborted for a TCP connection ended before it was accepted. The
// acceptor drops such requests before handing them over (acceptor.cpp,
// requester_gave_up, the same EINVAL asked for first); this covers a requester that gives
// up between that check and this call.
error_code requester_gone(error_code ec) {
  return ec == boost::system::errc::invalid_argument ? error_code(asio::error::connection_aborted)
                                                     : ec;
}

int timeout_ms(std::chrono::milliseconds t) {
  return static_cast<int>(std::clamp<std::int64_t>(t.count(), 1, 60 * 60 * 1000));
}

} // namespace

// ---------------------------------------------------------------- establishment

void connection_impl::start_connect(std::string host, std::uint16_t port,
                                    connection_operation&& op) {
  establish_handler_ = std::move(op);
  self_.hold(shared_from_this());
  op_started();
  if (options_.validate(connection_options::max_connect_private_data))
    return fail_establishment(errc::invalid_option, from::user_call);
  establish_handler_.on_cancel([this](asio::cancellation_type) {
    fail_establishment(asio::error::operation_aborted, from::user_call);
  });

  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec)
    return resolve_address(asio::ip::tcp::endpoint(address, port));
  // A host name: resolve it with Asio's resolver, then continue with rdma_cm.
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(ex_);
  state_ = state::resolving;
  arm_timeout(false);
  resolver->async_resolve(host, std::to_string(port), asio::ip::resolver_base::numeric_service,
                          [self = shared_from_this(),
                           resolver](error_code ec, asio::ip::tcp::resolver::results_type results) {
                            if (!self->establish_handler_)
                              return; // timed out or cancelled meanwhile
                            if (!ec && results.empty())
                              ec = asio::error::host_not_found;
                            if (ec)
                              return self->fail_establishment(ec, from::completion_path);
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
    return fail_establishment(cm_error(ec), from::user_call);
  sync_interest();
  sockaddr_storage dst{}, src{};
  to_sockaddr(destination, dst);
  sockaddr* src_ptr = nullptr;
  if (!options_.source_address.empty()) {
    auto source = asio::ip::make_address(options_.source_address, ec);
    if (ec)
      return fail_establishment(ec, from::user_call);
    to_sockaddr(asio::ip::tcp::endpoint(source, 0), src);
    src_ptr = reinterpret_cast<sockaddr*>(&src);
  }
  if (state_ != state::resolving) {
    state_ = state::resolving;
    arm_timeout(false);
  }
  if (::rdma_resolve_addr(id_.get(), src_ptr, reinterpret_cast<sockaddr*>(&dst),
                          timeout_ms(options_.timeout)) != 0) {
    return fail_establishment(address_error(from_errno()), from::user_call);
  }
}

void connection_impl::start_accept(std::shared_ptr<cm_channel> channel, cm_id_ptr id,
                                   const cm_event& request, connection_operation&& op) {
  establish_handler_ = std::move(op);
  self_.hold(shared_from_this());
  op_started();
  channel_ = std::move(channel);
  id_ = std::move(id);
  sync_interest();
  id_->context = static_cast<cm_event_target*>(this);
  auto data = request.data();
  peer_private_data_.assign(data.begin(), data.end());
  if (options_.validate(connection_options::max_accept_private_data))
    return fail_establishment(errc::invalid_option, from::user_call);
  if (auto ec = set_ack_timeout(); ec || (ec = create_resources(id_->verbs)))
    return fail_establishment(requester_gone(ec), from::user_call);
  take_peer_private_data(data); // now that the device is known: its credit offer
  rdma_conn_param param{};
  const auto ours = private_data_to_send();
  param.private_data = ours.data();
  param.private_data_len = static_cast<std::uint8_t>(ours.size());
  // Reads and atomics the peer may have outstanding towards us, and we towards it.
  param.responder_resources = std::min<int>(
      {options_.responder_resources, request.initiator_depth, device_->attributes.max_qp_rd_atom});
  param.initiator_depth = std::min<int>({options_.initiator_depth, request.responder_resources,
                                         device_->attributes.max_qp_init_rd_atom});
  param.rnr_retry_count = 7; // 7 = retry forever: RNR is our flow control
  param.retry_count = options_.retry_count;
  establish_handler_.on_cancel([this](asio::cancellation_type) {
    fail_establishment(asio::error::operation_aborted, from::user_call);
  });
  state_ = state::accepting;
  accepted_ = true;
  arm_timeout(false);
  if (::rdma_accept(id_.get(), &param) != 0)
    return fail_establishment(from_errno(), from::user_call);
  // rdma_accept moved the queue pair to RTS: the peer may send from now on.
  if (auto ec = set_rnr_timer())
    return fail_establishment(ec, from::user_call);
}

error_code connection_impl::set_ack_timeout() {
  std::uint8_t exponent = options_.ack_timeout_exponent;
  if (::rdma_set_option(id_.get(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent,
                        sizeof exponent) != 0)
    return from_errno();
  return {};
}

error_code connection_impl::set_rnr_timer() {
  // iWARP has no RNR (credits stand in for it, connection_credits.cpp); siw answered the
  // modify with EAGAIN while many connections were being accepted.
  if (device_->iwarp)
    return {};
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
  // What the device cannot hold is refused with a clear error before anything is made
  // (the kernel's answer would be ENOMEM or EINVAL); what can be fitted is, below.
  const auto& limits = device_->attributes;
  // On iWARP, credit reports (connection_credits.cpp) have send queue entries of their
  // own, taken from the window: a larger queue would double in size (siw rounds queues
  // up to a power of two), and siw's provider holds only so many queue pages per process.
  const std::uint32_t window =
      device_->iwarp && send_depth > report_slots ? send_depth - report_slots : send_depth;
  const std::uint32_t send_entries = device_->iwarp ? window + report_slots : send_depth;
  if (send_depth > std::uint32_t(limits.max_qp_wr))
    return device_->limit_exceeded("send queue depth", send_depth, limits.max_qp_wr, "max_qp_wr");
  if (!options_.shared_queues && recv_depth > std::uint32_t(limits.max_qp_wr))
    return device_->limit_exceeded("receive queue depth", recv_depth, limits.max_qp_wr,
                                   "max_qp_wr");
  if (!options_.shared_queues && send_depth + recv_depth > std::uint32_t(limits.max_cqe))
    return device_->limit_exceeded("completion queue size (send and receive depth together)",
                                   send_depth + recv_depth, limits.max_cqe, "max_cqe");
  if (options_.shared_queues) {
    // Shared CQ and SRQ: receive buffers and completion mode are the shared ones.
    shared_ = internal_access::impl(options_.shared_queues);
    if ((ec = shared_->bind(device_)))
      return ec;
    cq_ = shared_->cq();
    receives_ = &shared_->ring();
    recv_depth = receives_->depth();
  } else {
    cq_ = completion_queue::create(ex_, context, static_cast<int>(send_entries + recv_depth), ec);
    if (ec)
      return ec;
    cq_->attach(weak_from_this(), {&connection_impl::after_cq_batch, this});
    cq_->set_mode(options_.completion_mode, options_.adaptive_spin);
    if ((ec = own_receives_.init(pd(), recv_depth, options_.max_message_size,
                                 &connection_impl::on_receive_complete, this)))
      return ec;
    // Not on iWARP: each post there is reported to the peer as credit (credit_flow.hpp),
    // whose flow is left exactly as it is.
    if (!device_->iwarp)
      own_receives_.post_in_batches();
  }
  sync_interest();
  if ((ec = send_block_.allocate(pd(), send_depth, options_.max_message_size, 0)))
    return ec;
  if ((ec =
           atomic_block_.allocate(pd(), send_depth, sizeof(std::uint64_t), IBV_ACCESS_LOCAL_WRITE)))
    return ec;
  if ((ec = prepare_credits()))
    return ec;

  ibv_qp_init_attr attr{};
  attr.send_cq = cq_->native();
  attr.recv_cq = cq_->native();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = send_entries;
  attr.cap.max_recv_wr = shared_ ? 0 : recv_depth;
  attr.srq = shared_ ? shared_->srq() : nullptr;
  attr.cap.max_send_sge = std::min(options_.max_send_sge, std::uint32_t(limits.max_sge));
  attr.cap.max_recv_sge = 1;
  if (shared_) { // the shared CQ must hold this send queue's completions too
    if ((ec = shared_->reserve(send_entries)))
      return ec;
    shared_entries_ = send_entries; // given back by teardown()
  }
  // Devices do not report how much inline data they take, and refuse more (siw: 80
  // bytes; some devices none): halve it until the queue pair is made. Each try starts from
  // the halved request: a provider writes what it made into `attr.cap` (rxe rounds inline
  // data up) before rdma_cm may still fail (an accept whose requester has given up), and
  // halving that would never reach zero.
  for (std::uint32_t inline_data = options_.max_inline_data;; inline_data /= 2) {
    attr.cap.max_inline_data = inline_data;
    if (!(ec = create_qp(attr)))
      break;
    if (inline_data == 0)
      return ec;
  }
  qp_created_ = true;
  if (shared_)
    shared_->add(qp_->qp_num, this);
  inline_limit_ = std::min(attr.cap.max_inline_data, options_.max_inline_data);
  max_send_sge_ = attr.cap.max_send_sge;

  arrived_.reset(recv_depth);
  sends_.set_depth(window);
  sends_.set_iwarp(device_->iwarp);
  // Not on iWARP (connection_options.hpp: little to gain, and SoftiWARP left shared-queue
  // closes unfinished with unsignalled sends outstanding).
  sends_complete_at_post_ = options_.send_completion == send_completion::at_post && !device_->iwarp;
  sends_.set_signal_large_payloads(device_->soft_iwarp && !options_.siw_zero_copy);
  free_send_slots_.reserve(send_depth);
  for (std::uint32_t i = send_depth; i > 0; --i)
    free_send_slots_.push_back(i - 1);
  // Receives must be posted before the peer can send: before connect/accept.
  post_queued(from::user_call);
  return shared_ ? error_code() : cq_->arm();
}

error_code connection_impl::create_qp(ibv_qp_init_attr& attr) {
  if (out_of_band_)
    return create_out_of_band_qp(attr); // out_of_band.cpp
  errno = 0;
  if (::rdma_create_qp(id_.get(), pd(), &attr) != 0)
    return errno != 0 ? from_errno()
                      : refused_without_errno(
                            id_->verbs, "a queue pair of " + std::to_string(attr.cap.max_send_wr) +
                                            " send and " + std::to_string(attr.cap.max_recv_wr) +
                                            " receive entries");
  qp_ = id_->qp;
  return {};
}

void connection_impl::on_cm_event(const cm_event& event) {
  // Handlers run from here may drop the user's last reference.
  auto keep_alive = shared_from_this();
  using action = cm_step::action;
  if (state_ == state::connecting)
    handshake_under_way_ = false; // this is the peer's answer
  const cm_step step = next_step(state_, bool(establish_handler_), event.type, event.status);
  switch (step.what) {
  case action::none:
    break;
  case action::resolve_route:
    if (::rdma_resolve_route(id_.get(), timeout_ms(options_.timeout)) != 0)
      fail_establishment(cm_error(from_errno()), from::completion_path);
    break;
  case action::connect: {
    if (auto ec = create_resources(id_->verbs))
      return fail_establishment(ec, from::completion_path);
    rdma_conn_param param{};
    const auto ours = private_data_to_send();
    param.private_data = ours.data();
    param.private_data_len = static_cast<std::uint8_t>(ours.size());
    param.responder_resources =
        std::min<int>(options_.responder_resources, device_->attributes.max_qp_rd_atom);
    param.initiator_depth =
        std::min<int>(options_.initiator_depth, device_->attributes.max_qp_init_rd_atom);
    param.rnr_retry_count = 7;
    param.retry_count = options_.retry_count;
    state_ = state::connecting;
    if (::rdma_connect(id_.get(), &param) != 0)
      return fail_establishment(from_errno(), from::completion_path);
    handshake_under_way_ = device_->iwarp;
    break;
  }
  case action::fail_rejected: {
    auto data = event.data(); // the rejecting peer's reason
    peer_private_data_.assign(data.begin(), data.end());
    fail_establishment(step.error, from::completion_path);
    break;
  }
  case action::fail:
    fail_establishment(step.error, from::completion_path);
    break;
  case action::finish:
    finish_establishment(event);
    break;
  case action::peer_closed:
    ending_.peer_disconnected();
    // Deliver every message that arrived before the disconnect first.
    if (cq_)
      cq_->poll();
    begin_close({});
    break;
  case action::disconnected:
    complete_disconnect({}); // our own disconnect finished (or was already drained)
    break;
  case action::close:
    begin_close(step.error);
    break;
  case action::disconnect_abandoned:
    if (::rdma_disconnect(id_.get()) != 0)
      end_abandoned(); // else at DISCONNECTED
    break;
  case action::end_abandoned:
    end_abandoned();
    break;
  }
}

void connection_impl::finish_establishment(const cm_event& event) {
  if (!establish_handler_)
    return;
  timer_.cancel();
  if (state_ == state::connecting) // the acceptor's reply carries its private data
    take_peer_private_data(event.data());
  if (state_ == state::connecting) {
    // The queue pair reached RTS while rdma_cm processed the reply.
    if (auto ec = set_rnr_timer())
      return fail_establishment(ec, from::completion_path);
  }
  state_ = state::open;
  op_finished();
  sync_interest();
  arm_keepalive();
  auto handler = std::move(establish_handler_);
  handler.complete(ex_, from::completion_path, error_code(),
                   internal_access::make_connection(shared_from_this()));
}

void connection_impl::fail_establishment(error_code ec, from origin) {
  if (!establish_handler_)
    return;
  ASIO_RDMA_TRACE("establishment failed in state %d: %s", int(state_), ec.message().c_str());
  timer_.cancel();
  auto handler = std::move(establish_handler_);
  // Keep the implementation for the rejection's private data; otherwise hand
  // back a connection that is not open.
  connection result =
      ec == errc::rejected ? internal_access::make_connection(shared_from_this()) : connection();
  op_finished();
  std::shared_ptr<void> keep;
  if (handshake_under_way_) {
    abandon_handshake();
  } else {
    teardown();
    state_ = state::closed;
    keep = self_.release();
  }
  handler.complete(ex_, origin, ec, std::move(result));
}

void connection_impl::abandon_handshake() {
  // iWARP's connection manager holds the queue pair from rdma_connect until the peer
  // answers, and destroying it meanwhile blocks in the kernel until then (siw: its MPA
  // timeout, 10 s), with the io_context's thread; nor may the id be destroyed before the
  // answer. So the caller's operation completes now, and this object, still held, waits
  // for the answer on the CM channel (on_cm_event) to destroy what is left.
  state_ = state::abandoned;
  sync_interest();
  // A peer that never answers: iWARP's handshake has its own timeout (siw's MPA timeout
  // is 10 s); past this bound the queue pair is destroyed anyway, blocking if need be.
  call_after<&connection_impl::end_abandoned>(timer_, std::chrono::seconds(30));
}

void connection_impl::end_abandoned() {
  if (state_ != state::abandoned)
    return;
  timer_.cancel();
  teardown();
  state_ = state::closed;
  sync_interest();
  auto keep = self_.release(); // may destroy *this when the caller returns
}

void connection_impl::arm_timeout(bool for_disconnect) {
  timer_.expires_after(options_.timeout);
  timer_.async_wait([self = shared_from_this(), for_disconnect](const error_code& ec) {
    if (ec)
      return;
    if (for_disconnect)
      self->complete_disconnect(asio::error::timed_out);
    else
      self->fail_establishment(asio::error::timed_out, from::completion_path);
  });
}

// ---------------------------------------------------------------- keepalive

void connection_impl::arm_keepalive() {
  if (options_.keepalive_interval.count() == 0 || state_ != state::open)
    return;
  call_after<&connection_impl::keepalive_tick>(keepalive_timer_, options_.keepalive_interval);
}

void connection_impl::keepalive_tick() {
  if (state_ != state::open)
    return;
  // Sends completed at post may end the send window unsignalled, with no completion on
  // its way even once the peer has acknowledged them: a probe behind them (RC completes
  // in order) takes them out, so that what stays posted is work the transport is still
  // retrying (bounded by its retries, or a slow receiver's RNR), as keepalive assumes.
  if (sends_.silent_tail())
    queue_probe(size_operation([](error_code, std::size_t) {}, ex_));
  switch (keepalive_.tick(completions_, sends_.outstanding())) {
  case keepalive_monitor::verdict::peer_lost:
    return begin_close(asio::error::timed_out);
  case keepalive_monitor::verdict::send_probe: {
    // It overtakes messages held back by credits (iWARP): the probe needs none, and a
    // sender held back still learns whether its peer lives.
    queue_probe(size_operation(
                    [weak = weak_from_this()](error_code, std::size_t) {
                      if (auto self = weak.lock())
                        self->keepalive_.probe_finished();
                    },
                    ex_),
                true);
    break;
  }
  case keepalive_monitor::verdict::keep_waiting:
    break;
  }
  arm_keepalive();
}

} // namespace asio_rdma::detail
