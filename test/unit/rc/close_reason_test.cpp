// What operations get once a connection is no longer open
// (lib/rc/close_reason.hpp), for each way a connection ends, without a device.
#include <boost/test/unit_test.hpp>

#include "rc/close_reason.hpp"

#include <boost/asio/error.hpp>

BOOST_AUTO_TEST_SUITE(close_reason_tests)

namespace asio = boost::asio;
using asio_rdma::error_code;
using asio_rdma::detail::close_reason;

BOOST_AUTO_TEST_CASE(never_opened) {
  close_reason r;
  BOOST_TEST((r.for_new_work() == asio::error::not_connected));
  BOOST_TEST((r.for_receive() == asio::error::not_connected));
  BOOST_TEST((r.for_withdrawn_work() == asio::error::operation_aborted));
  BOOST_TEST((r.for_late_disconnect() == asio::error::not_connected));
}

BOOST_AUTO_TEST_CASE(closed_here_receives_are_aborted_new_work_is_not_connected) {
  close_reason r;
  r.closed_locally();
  BOOST_TEST((r.for_receive() == asio::error::operation_aborted));
  BOOST_TEST((r.for_new_work() == asio::error::not_connected));
  BOOST_TEST((r.for_withdrawn_work() == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(a_disconnect_by_either_side_is_the_end_of_the_stream) {
  close_reason peer;
  peer.peer_disconnected();
  BOOST_TEST((peer.for_receive() == asio::error::eof));
  BOOST_TEST(!peer.for_late_disconnect()); // already done
  BOOST_TEST(peer.peer_has_disconnected());

  close_reason ours;
  ours.disconnect_requested();
  BOOST_TEST((ours.for_receive() == asio::error::eof));
  BOOST_TEST((ours.for_late_disconnect() == asio::error::not_connected));
  BOOST_TEST(ours.disconnect_was_requested());
  // close() after our own disconnect: receives are aborted, not eof.
  ours.closed_locally();
  BOOST_TEST((ours.for_receive() == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(the_first_failure_is_the_reason_for_everything) {
  close_reason r;
  r.failed(error_code()); // no error: not a failure
  BOOST_TEST(!r.failure());
  r.failed(asio::error::timed_out); // e.g. transport retries exceeded
  r.failed(asio::error::connection_reset); // a consequence: ignored
  r.peer_disconnected();
  r.closed_locally();
  BOOST_TEST((r.failure() == asio::error::timed_out));
  BOOST_TEST((r.for_new_work() == asio::error::timed_out));
  BOOST_TEST((r.for_receive() == asio::error::timed_out));
  BOOST_TEST((r.for_withdrawn_work() == asio::error::timed_out));
}

BOOST_AUTO_TEST_SUITE_END()
