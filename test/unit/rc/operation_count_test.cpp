// The connection's pending-operation count (lib/rc/operation_count.hpp) without a device:
// when the waits on the CM channel and the completion queue must be updated, and the
// deferral that keeps a ping-pong from dropping and re-adding them per operation.
#include <boost/test/unit_test.hpp>

#include "rc/operation_count.hpp"

BOOST_AUTO_TEST_SUITE(operation_count_tests)

using asio_rdma::detail::operation_count;

BOOST_AUTO_TEST_CASE(the_first_operation_and_the_last_one_update_the_waits) {
  operation_count c;
  BOOST_TEST(!c.any());
  BOOST_TEST(c.started()); // 0 -> 1: wait
  BOOST_TEST(c.any());
  BOOST_TEST(!c.started()); // 1 -> 2: nothing changes
  BOOST_TEST(!c.finished());
  BOOST_TEST(c.finished()); // 1 -> 0: the last one (outside a batch: stop waiting now)
  BOOST_TEST(!c.any());
}

BOOST_AUTO_TEST_CASE(a_ping_pong_inside_a_batch_keeps_the_waits) {
  operation_count c;
  BOOST_TEST(c.started());
  // The receive completes inside a batch of the connection's own queue...
  BOOST_TEST(c.finished());
  c.defer_update();
  BOOST_TEST(!c.any());
  // ...and its handler starts the next one at once: the waits were never dropped.
  BOOST_TEST(!c.started());
  BOOST_TEST(!c.batch_ended()); // nothing left to decide at the batch's end
}

BOOST_AUTO_TEST_CASE(a_batch_that_ends_idle_drops_the_waits_at_its_end) {
  operation_count c;
  BOOST_TEST(c.started());
  BOOST_TEST(c.finished());
  c.defer_update();
  BOOST_TEST(c.batch_ended()); // now: idle
  BOOST_TEST(!c.batch_ended()); // once
  BOOST_TEST(c.started());      // and the next operation waits again
}

BOOST_AUTO_TEST_CASE(an_update_made_anyway_cancels_the_deferral) {
  operation_count c;
  BOOST_TEST(c.started());
  BOOST_TEST(c.finished());
  c.defer_update();
  c.updating(); // e.g. the connection closed inside the batch
  BOOST_TEST(!c.batch_ended());
  BOOST_TEST(c.started()); // the waits were dropped: the next one must add them
}

BOOST_AUTO_TEST_CASE(finishing_more_than_started_is_harmless) {
  operation_count c;
  BOOST_TEST(!c.finished());
  BOOST_TEST(!c.any());
}

BOOST_AUTO_TEST_SUITE_END()
