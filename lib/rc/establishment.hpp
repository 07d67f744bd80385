// What a connection does with each rdma_cm event, by where it stands: the decision, with
// the rdma_cm calls, timers and handlers left to the connection
// (connection_establish.cpp). No verbs or rdma_cm call: test/unit/rc/establishment_test.cpp
// drives every event in every state without a device.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/error.hpp>

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>

namespace asio_rdma::detail {

/// Where a connection stands.
enum class connection_state : std::uint8_t {
  idle,
  resolving,  // address and route resolution
  connecting, // rdma_connect sent
  accepting,  // rdma_accept sent
  open,
  closing, // closed locally or by the peer, or failed: draining posted work
  closed,  // queue pair destroyed
  // iWARP: a connect given up (cancelled, timed out, closed) while its handshake was under
  // way. The kernel holds the queue pair until the peer answers (siw: at most its 10 s MPA
  // timeout); destroying it before would block the thread until then. Ended by the answer.
  abandoned,
};

/// What to do with one rdma_cm event.
struct cm_step {
  enum class action : std::uint8_t {
    none,          // nothing (an event for a step already passed, TIMEWAIT_EXIT, ...)
    resolve_route, // the address is resolved: rdma_resolve_route
    connect,       // the route is resolved: create the resources, then rdma_connect
    fail,          // the establishment failed with `error`
    fail_rejected, // ... because the peer rejected: keep its private data (its reason)
    finish,        // ESTABLISHED: the connection is open
    peer_closed,   // the peer disconnected an open connection: deliver what arrived, close
    disconnected,  // our own disconnect has finished
    close,         // the device went away under the connection: close with `error`
    disconnect_abandoned, // abandoned, and the peer accepted after all: rdma_disconnect
    end_abandoned,        // abandoned, and the handshake is over: destroy what is left
  };
  action what = action::none;
  error_code error;
};

/// rdma_cm's reject reason when the peer's application called rdma_reject
/// (IB_CM_REJ_CONSUMER_DEFINED); any other reason means nobody listened.
inline constexpr int reject_reason_consumer = 28;
/// The same on iWARP, whose statuses are negative errnos: iw_cm reports an MPA reject,
/// which only the peer's application sends, as -ECONNREFUSED (siw: -ECONNRESET). With no
/// listener the TCP connection itself is refused, and rdma_connect fails at once.
inline bool rejected_by_application(int status) noexcept {
  return status == reject_reason_consumer || status == -ECONNREFUSED || status == -ECONNRESET;
}

/// The step for `type` (with `status`, the event's) on a connection in `state`;
/// `establishing`: an async_connect or async_accept is still waiting for its outcome.
inline cm_step next_step(connection_state state, bool establishing, rdma_cm_event_type type,
                         int status) noexcept {
  using a = cm_step::action;
  if (state == connection_state::abandoned) {
    switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      return {a::disconnect_abandoned, {}};
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return {a::end_abandoned, {}};
    default:
      return {};
    }
  }
  switch (type) {
  case RDMA_CM_EVENT_ADDR_RESOLVED:
    return {state == connection_state::resolving ? a::resolve_route : a::none, {}};
  case RDMA_CM_EVENT_ROUTE_RESOLVED:
    return {state == connection_state::resolving ? a::connect : a::none, {}};
  case RDMA_CM_EVENT_ADDR_ERROR:
    return {a::fail, errc::address_resolution_failed};
  case RDMA_CM_EVENT_ROUTE_ERROR:
    return {a::fail, errc::route_resolution_failed};
  case RDMA_CM_EVENT_UNREACHABLE:
    return {a::fail, errc::unreachable};
  case RDMA_CM_EVENT_REJECTED:
    return {a::fail_rejected, rejected_by_application(status)
                                  ? error_code(errc::rejected)
                                  : error_code(boost::asio::error::connection_refused)};
  case RDMA_CM_EVENT_CONNECT_ERROR:
    return {a::fail, errc::connection_error};
  case RDMA_CM_EVENT_ESTABLISHED:
    return {establishing ? a::finish : a::none, {}};
  case RDMA_CM_EVENT_DISCONNECTED:
    if (establishing)
      return {a::fail, boost::asio::error::connection_reset};
    return {state == connection_state::open ? a::peer_closed : a::disconnected, {}};
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    return {establishing ? a::fail : a::close, errc::device_removed};
  default:
    return {};
  }
}

} // namespace asio_rdma::detail
