// Flow control by credits (lib/rc/credit_flow.hpp) without a device: the offer in the
// private data, the credit word, and when the receiving end reports.
#include <boost/test/unit_test.hpp>

#include "rc/credit_flow.hpp"

#include <vector>

BOOST_AUTO_TEST_SUITE(credit_flow_tests)

using namespace asio_rdma::detail;

BOOST_AUTO_TEST_CASE(an_offer_after_the_users_private_data_round_trips_and_leaves_it_intact) {
  const std::vector<std::byte> user{std::byte{1}, std::byte{2}, std::byte{3}};
  credit_offer offer{64, 0x1234abcd, 0x00007f0012345678};
  std::array<std::byte, 256> out{};
  const auto size = append_offer(out, user, offer);
  BOOST_TEST(size == user.size() + credit_offer_size);
  std::span<const std::byte> received(out.data(), size);
  auto got = take_offer(received);
  BOOST_TEST_REQUIRE(got.has_value());
  BOOST_TEST((*got == offer));
  BOOST_TEST(received.size() == user.size());
  BOOST_TEST(std::equal(received.begin(), received.end(), user.begin()));
}

BOOST_AUTO_TEST_CASE(private_data_without_an_offer_is_left_as_it_is) {
  std::vector<std::byte> plain(40, std::byte{'a'});
  std::span<const std::byte> data(plain);
  BOOST_TEST(!take_offer(data).has_value());
  BOOST_TEST(data.size() == 40u);
  std::span<const std::byte> short_data(plain.data(), 5);
  BOOST_TEST(!take_offer(short_data).has_value());
  BOOST_TEST(short_data.size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_credit_word_caught_half_written_is_passed_over) {
  BOOST_TEST(posted_in(credit_word(0)).value() == 0u);
  BOOST_TEST(posted_in(credit_word(0xfffffffeu)).value() == 0xfffffffeu);
  BOOST_TEST(!posted_in(0).has_value()); // the word before the first report
  // The low half of a new count with the high half of the old one.
  const auto torn = (credit_word(7) & 0xffffffff00000000u) | (credit_word(8) & 0xffffffffu);
  BOOST_TEST(!posted_in(torn).has_value());
}

BOOST_AUTO_TEST_CASE(a_receiver_reports_every_quarter_of_its_depth_when_the_sender_has_plenty) {
  credit_reporter r;
  r.start(64);
  BOOST_TEST(!r.should_report());
  for (int i = 0; i < 15; ++i) {
    r.arrived();
    r.posted(1);
    BOOST_TEST(!r.should_report());
  }
  r.arrived();
  r.posted(1);
  BOOST_TEST(r.should_report());
  BOOST_TEST(r.report() == 80u);
  BOOST_TEST(!r.should_report());
}

BOOST_AUTO_TEST_CASE(a_receiver_reports_at_once_when_its_sender_may_be_running_short) {
  credit_reporter r;
  r.start(64);
  for (int i = 0; i < 50; ++i) // 50 messages queued, not yet delivered: 14 credits left
    r.arrived();
  BOOST_TEST(!r.should_report()); // nothing reposted: nothing to tell
  r.posted(1);
  BOOST_TEST(r.should_report());
  BOOST_TEST(r.report() == 65u);
}

BOOST_AUTO_TEST_CASE(a_depth_of_one_reports_each_receive) {
  credit_reporter r;
  r.start(1);
  r.arrived();
  r.posted(1);
  BOOST_TEST(r.should_report());
  BOOST_TEST(r.report() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
