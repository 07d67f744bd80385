// Transport timer options: validation and the RNR timer encoding.
#define BOOST_TEST_MODULE unit_transport_options
#include <boost/test/unit_test.hpp>

#include <asio_rdma/connection_options.hpp>

#include "rc/qp_timers.hpp"

#include <string>

namespace ar = asio_rdma;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(rnr_timer_code_is_the_smallest_delay_at_least_the_request) {
  using ar::detail::rnr_timer_code;
  using ar::detail::rnr_timer_delay;
  BOOST_TEST(rnr_timer_code(10us) == 1);
  BOOST_TEST(rnr_timer_code(11us) == 2);
  BOOST_TEST(rnr_timer_code(640us) == 12);
  BOOST_TEST(rnr_timer_code(641us) == 13);
  BOOST_TEST(rnr_timer_code(491520us) == 31);
  BOOST_TEST(rnr_timer_code(491521us) == 0); // only 655.36 ms is longer
  BOOST_TEST(rnr_timer_delay(0).count() == 655360);
  for (std::uint8_t code = 1; code < 32; ++code) {
    BOOST_TEST(rnr_timer_code(rnr_timer_delay(code)) == code);
    if (code > 1)
      BOOST_TEST((rnr_timer_delay(code) > rnr_timer_delay(code - 1)));
  }
}

BOOST_AUTO_TEST_CASE(defaults_are_valid_and_bound_a_dead_peer) {
  ar::connection_options o;
  BOOST_TEST(o.problem() == nullptr);
  BOOST_TEST(o.rnr_retry_delay >= 100us);
  BOOST_TEST(o.rnr_retry_delay <= 1000us);
  BOOST_TEST(o.retry_count < 7); // rxe treats 7 as "forever"
  // 4.096 us * 2^15 * 7 = 0.94 s
  BOOST_TEST(o.transport_give_up_time().count() == 939524);
  BOOST_TEST(o.keepalive_interval.count() == 0); // opt-in
}

BOOST_AUTO_TEST_CASE(out_of_range_transport_options_are_named) {
  auto problem_of = [](auto change) {
    ar::connection_options o;
    change(o);
    BOOST_TEST((o.validate() == ar::errc::invalid_option));
    return std::string(o.problem() ? o.problem() : "");
  };
  BOOST_TEST(problem_of([](auto& o) { o.rnr_retry_delay = 9us; }).find("rnr_retry_delay") == 0u);
  BOOST_TEST(problem_of([](auto& o) { o.rnr_retry_delay = 500ms; }).find("rnr_retry_delay") == 0u);
  BOOST_TEST(problem_of([](auto& o) { o.ack_timeout_exponent = 0; }).find("ack_timeout") == 0u);
  BOOST_TEST(problem_of([](auto& o) { o.ack_timeout_exponent = 32; }).find("ack_timeout") == 0u);
  BOOST_TEST(problem_of([](auto& o) { o.retry_count = 8; }).find("retry_count") == 0u);
  BOOST_TEST(problem_of([](auto& o) { o.keepalive_interval = -1ms; }).find("keepalive_interval") ==
             0u);
  BOOST_TEST(problem_of([](auto& o) { o.keepalive_count = 0; }).find("keepalive_count") == 0u);
}
