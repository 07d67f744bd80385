// Keepalive's decision (lib/rc/keepalive_monitor.hpp) without a device: when a probe is
// sent, what proves the peer alive, and when the connection gives up.
#include <boost/test/unit_test.hpp>

#include "rc/keepalive_monitor.hpp"

BOOST_AUTO_TEST_SUITE(keepalive_monitor_tests)

using asio_rdma::detail::keepalive_monitor;
using verdict = keepalive_monitor::verdict;

BOOST_AUTO_TEST_CASE(a_busy_connection_never_probes) {
  keepalive_monitor k(3);
  for (std::uint32_t completions = 1; completions <= 100; ++completions)
    BOOST_TEST((k.tick(completions, 0) == verdict::keep_waiting));
  BOOST_TEST(k.silent_intervals() == 0u);
}

BOOST_AUTO_TEST_CASE(a_silent_idle_connection_probes_once_and_an_answer_resets_it) {
  keepalive_monitor k(3);
  BOOST_TEST((k.tick(0, 0) == verdict::send_probe));
  // The probe is posted; the peer's transport acknowledges it: one more completion.
  k.probe_finished();
  BOOST_TEST((k.tick(1, 0) == verdict::keep_waiting));
  BOOST_TEST(k.silent_intervals() == 0u);
  // Silent again: a new probe.
  BOOST_TEST((k.tick(1, 0) == verdict::send_probe));
}

BOOST_AUTO_TEST_CASE(an_unanswered_probe_gives_up_after_the_count) {
  keepalive_monitor k(3);
  BOOST_TEST((k.tick(0, 0) == verdict::send_probe));
  // The probe stays posted (the peer is gone; the transport is still retrying): no
  // second probe, and it does not count as the user's work.
  BOOST_TEST((k.tick(0, 1) == verdict::keep_waiting));
  BOOST_TEST((k.tick(0, 1) == verdict::peer_lost));
}

BOOST_AUTO_TEST_CASE(posted_user_work_is_not_silence) {
  // A slow receiver may hold a send by RNR as long as it likes: the transport's retries
  // bound it, not keepalive.
  keepalive_monitor k(2);
  for (int i = 0; i < 10; ++i)
    BOOST_TEST((k.tick(5, 1) == verdict::keep_waiting));
  // With the probe outstanding, one more posted send is still the user's.
  BOOST_TEST((k.tick(5, 0) == verdict::send_probe));
  for (int i = 0; i < 10; ++i)
    BOOST_TEST((k.tick(5, 2) == verdict::keep_waiting));
}

BOOST_AUTO_TEST_CASE(a_count_of_one_gives_up_at_the_first_silent_interval) {
  keepalive_monitor k(1);
  BOOST_TEST((k.tick(0, 0) == verdict::peer_lost));
}

BOOST_AUTO_TEST_SUITE_END()
