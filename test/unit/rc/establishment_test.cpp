// What a connection does with each rdma_cm event, by where it stands
// (lib/rc/establishment.hpp), without a device: the steps of an active connect, the
// error each failure event gives, and the events that end an open connection.
#include <boost/test/unit_test.hpp>

#include "rc/establishment.hpp"

BOOST_AUTO_TEST_SUITE(establishment_tests)

using asio_rdma::error_code;
using asio_rdma::detail::cm_step;
using asio_rdma::detail::connection_state;
using asio_rdma::detail::next_step;
using asio_rdma::detail::reject_reason_consumer;
using action = cm_step::action;
using asio_rdma::errc;

BOOST_AUTO_TEST_CASE(an_active_connect_resolves_then_connects_then_finishes) {
  BOOST_TEST((next_step(connection_state::resolving, true, RDMA_CM_EVENT_ADDR_RESOLVED, 0).what ==
              action::resolve_route));
  BOOST_TEST((next_step(connection_state::resolving, true, RDMA_CM_EVENT_ROUTE_RESOLVED, 0).what ==
              action::connect));
  BOOST_TEST((next_step(connection_state::connecting, true, RDMA_CM_EVENT_ESTABLISHED, 0).what ==
              action::finish));
}

BOOST_AUTO_TEST_CASE(a_resolution_event_after_resolving_does_nothing) {
  // e.g. a late event after the attempt timed out and the connection moved on
  for (auto s : {connection_state::connecting, connection_state::open, connection_state::closed}) {
    BOOST_TEST((next_step(s, false, RDMA_CM_EVENT_ADDR_RESOLVED, 0).what == action::none));
    BOOST_TEST((next_step(s, false, RDMA_CM_EVENT_ROUTE_RESOLVED, 0).what == action::none));
  }
  BOOST_TEST((next_step(connection_state::open, false, RDMA_CM_EVENT_ESTABLISHED, 0).what ==
              action::none));
}

BOOST_AUTO_TEST_CASE(each_failure_event_has_its_own_error) {
  const auto fail = [](rdma_cm_event_type type) {
    return next_step(connection_state::resolving, true, type, 0);
  };
  BOOST_TEST((fail(RDMA_CM_EVENT_ADDR_ERROR).error == errc::address_resolution_failed));
  BOOST_TEST((fail(RDMA_CM_EVENT_ROUTE_ERROR).error == errc::route_resolution_failed));
  BOOST_TEST((fail(RDMA_CM_EVENT_UNREACHABLE).error == errc::unreachable));
  BOOST_TEST((fail(RDMA_CM_EVENT_CONNECT_ERROR).error == errc::connection_error));
  BOOST_TEST((fail(RDMA_CM_EVENT_DEVICE_REMOVAL).error == errc::device_removed));
  BOOST_TEST((fail(RDMA_CM_EVENT_DISCONNECTED).error == boost::asio::error::connection_reset));
  for (auto type : {RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_UNREACHABLE,
                    RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_DEVICE_REMOVAL,
                    RDMA_CM_EVENT_DISCONNECTED})
    BOOST_TEST((fail(type).what == action::fail));
}

BOOST_AUTO_TEST_CASE(a_rejection_by_the_application_is_rejected_otherwise_refused) {
  const auto by_app = next_step(connection_state::connecting, true, RDMA_CM_EVENT_REJECTED,
                                reject_reason_consumer);
  BOOST_TEST((by_app.what == action::fail_rejected)); // keeps the peer's reason
  BOOST_TEST((by_app.error == errc::rejected));
  const auto by_app_iwarp = next_step(connection_state::connecting, true,
                                      RDMA_CM_EVENT_REJECTED, -ECONNREFUSED); // MPA reject
  BOOST_TEST((by_app_iwarp.error == errc::rejected));
  BOOST_TEST((next_step(connection_state::connecting, true, RDMA_CM_EVENT_REJECTED, -ECONNRESET)
                  .error == errc::rejected)); // siw's MPA reject
  const auto nobody = next_step(connection_state::connecting, true, RDMA_CM_EVENT_REJECTED, 8);
  BOOST_TEST((nobody.error == boost::asio::error::connection_refused));
}

BOOST_AUTO_TEST_CASE(an_open_connection_ends_by_the_peer_or_the_device) {
  BOOST_TEST((next_step(connection_state::open, false, RDMA_CM_EVENT_DISCONNECTED, 0).what ==
              action::peer_closed));
  const auto removed = next_step(connection_state::open, false, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
  BOOST_TEST((removed.what == action::close));
  BOOST_TEST((removed.error == errc::device_removed));
  // A disconnect that answers our own finishes it.
  BOOST_TEST((next_step(connection_state::closing, false, RDMA_CM_EVENT_DISCONNECTED, 0).what ==
              action::disconnected));
}

BOOST_AUTO_TEST_CASE(an_abandoned_iwarp_handshake_ends_at_the_peers_answer) {
  // A connect given up while iWARP's handshake is under way keeps its queue pair until the
  // peer answers: an acceptance is disconnected, any other answer ends it.
  const auto abandoned = [](rdma_cm_event_type type) {
    return next_step(connection_state::abandoned, false, type, -ECONNRESET).what;
  };
  BOOST_TEST((abandoned(RDMA_CM_EVENT_ESTABLISHED) == action::disconnect_abandoned));
  for (auto type : {RDMA_CM_EVENT_REJECTED, RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE,
                    RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL})
    BOOST_TEST((abandoned(type) == action::end_abandoned));
  BOOST_TEST((abandoned(RDMA_CM_EVENT_TIMEWAIT_EXIT) == action::none));
  BOOST_TEST((abandoned(RDMA_CM_EVENT_ADDR_RESOLVED) == action::none));
}

BOOST_AUTO_TEST_CASE(other_events_need_nothing) {
  BOOST_TEST((next_step(connection_state::closed, false, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0).what ==
              action::none));
  BOOST_TEST((next_step(connection_state::open, false, RDMA_CM_EVENT_ADDR_CHANGE, 0).what ==
              action::none));
}

BOOST_AUTO_TEST_SUITE_END()
