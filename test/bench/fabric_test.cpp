// rdma_fabric's schedule, verdicts, options and report (no device, no MPI).
#define BOOST_TEST_MODULE bench_fabric
#include <boost/test/unit_test.hpp>

#include "cli.hpp"
#include "fabric_options.hpp"
#include "report.hpp"
#include "schedule.hpp"
#include "verdict.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <set>
#include <sstream>
#include <vector>

using namespace rdma_fabric;

namespace {

record bandwidth(int from, int to, double gbps, int round = 0) {
  record r;
  r.what = kind::bandwidth;
  r.from = from;
  r.to = to;
  r.round = round;
  r.gbps = gbps;
  r.iterations = 100;
  r.seconds = 1;
  return r;
}

record latency(int from, int to, double median_us, int round = 0) {
  record r;
  r.what = kind::latency;
  r.from = from;
  r.to = to;
  r.round = round;
  r.latency_min_us = r.latency_median_us = r.latency_p99_us = median_us;
  r.iterations = 100;
  r.seconds = 1;
  return r;
}

fabric_settings parse(std::vector<std::string> args) {
  fabric_settings s;
  CLI::App app("", "rdma_fabric");
  describe(app, s);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(tournament_meets_every_pair_once_in_rounds_of_disjoint_pairs) {
  for (int n = 2; n <= 9; ++n) {
    auto rounds = tournament(n);
    BOOST_TEST(rounds.size() == std::size_t(n % 2 == 0 ? n - 1 : n), "n=" << n);
    std::set<std::pair<int, int>> met;
    for (const auto& r : rounds) {
      BOOST_TEST(r.size() == std::size_t(n / 2), "n=" << n);
      std::set<int> busy;
      for (auto [a, b] : r) {
        BOOST_TEST(a < b);
        BOOST_TEST(b < n);
        BOOST_TEST(busy.insert(a).second, "rank " << a << " twice in a round, n=" << n);
        BOOST_TEST(busy.insert(b).second, "rank " << b << " twice in a round, n=" << n);
        BOOST_TEST(met.insert({a, b}).second, "pair met twice, n=" << n);
      }
    }
    BOOST_TEST(met.size() == std::size_t(n * (n - 1) / 2), "n=" << n);
  }
  BOOST_TEST(tournament(1).empty());
  BOOST_TEST(tournament(0).empty());
}

BOOST_AUTO_TEST_CASE(slow_and_failed_pairs_are_flagged_against_the_best) {
  std::vector<record> records{bandwidth(0, 1, 10),  bandwidth(1, 0, 9), bandwidth(0, 2, 4.9),
                              bandwidth(2, 0, 5.1), latency(0, 1, 2),   latency(0, 2, 6.5),
                              latency(1, 2, 5.9)};
  records.push_back(bandwidth(1, 2, 0));
  records.back().set_error("transport retry counter exceeded");
  thresholds limits; // 0.5 of the best, 3 x the lowest
  auto flags = judge(records, limits);
  BOOST_REQUIRE(flags.size() == 3u);
  BOOST_TEST((flags[0].first.from == 0 && flags[0].first.to == 2 &&
              flags[0].first.what == kind::bandwidth));
  BOOST_TEST(flags[0].reason.find("best 10") != std::string::npos, flags[0].reason);
  BOOST_TEST((flags[1].first.what == kind::latency && flags[1].first.to == 2));
  BOOST_TEST(flags[2].reason.find("failed: transport") == 0u, flags[2].reason);
  BOOST_TEST(flags[0].status() == "not retested");

  // A retest (round -1) that passes makes the flag transient; one that does
  // not confirms it. Retests never move the references.
  records.push_back(bandwidth(0, 2, 9.5, -1));
  records.push_back(latency(0, 2, 100, -1));
  flags = judge(records, limits);
  BOOST_REQUIRE(flags.size() == 3u);
  BOOST_TEST(flags[0].status() == "transient");
  BOOST_TEST(flags[1].status() == "confirmed");

  thresholds absolute;
  absolute.bandwidth_fraction = 0;
  absolute.latency_multiple = 1e6;
  absolute.min_gbps = 9.2;
  absolute.max_latency_us = 6;
  std::vector<record> clean{bandwidth(0, 1, 10), bandwidth(1, 0, 9), latency(0, 1, 7)};
  flags = judge(clean, absolute);
  BOOST_REQUIRE(flags.size() == 2u);
  BOOST_TEST(flags[0].reason.find("minimum") != std::string::npos);
  BOOST_TEST(flags[1].reason.find("maximum") != std::string::npos);
  BOOST_TEST(judge(clean, thresholds{}).empty());
}

BOOST_AUTO_TEST_CASE(options_have_documented_defaults_and_quick_shortens_tests) {
  auto s = parse({});
  BOOST_TEST(s.limits.bandwidth_fraction == 0.5);
  BOOST_TEST(s.limits.latency_multiple == 3.0);
  BOOST_TEST(s.duration == 1.0);
  BOOST_TEST(s.retest);
  BOOST_TEST(!s.bidirectional);
  s = parse(
      {"--quick", "--bidirectional", "--no-retest", "--size", "1m", "--bandwidth-fraction", "0.8"});
  BOOST_TEST(s.duration == 0.25);
  BOOST_TEST(s.warmup == 0.05);
  BOOST_TEST(s.bidirectional);
  BOOST_TEST(!s.retest);
  BOOST_TEST(s.size == 1u << 20);
  BOOST_TEST(s.limits.bandwidth_fraction == 0.8);
  s = parse({"--quick", "--duration", "2"});
  BOOST_TEST(s.duration == 2.0);
  BOOST_CHECK_THROW(parse({"--bandwidth-fraction", "1.5"}), CLI::ValidationError);
  BOOST_CHECK_THROW(parse({"--depth", "0"}), asio_rdma::cli::usage_error);
  BOOST_CHECK_THROW(parse({"--latency-multiple", "x"}), CLI::ParseError);
}

BOOST_AUTO_TEST_CASE(report_has_both_matrices_every_measurement_and_the_verdict) {
  fabric_settings s;
  std::vector<record> records{bandwidth(0, 1, 10), bandwidth(1, 0, 2), latency(0, 1, 5)};
  records.push_back(bandwidth(1, 0, 2.5, -1));
  fabric_report r{s,
                  {{"a", "192.0.2.1", 1000, "rxe0"}, {"b", "192.0.2.2", 1001, "rxe0"}},
                  records,
                  judge(records, s.limits)};
  auto j = to_json(r);
  BOOST_TEST(j["parameters"]["bandwidth_fraction"] == 0.5);
  BOOST_TEST(j["ranks"].size() == 2u);
  BOOST_TEST(j["measurements"].size() == 4u);
  BOOST_TEST(j["bandwidth_gbps"][0][1] == 10.0);
  BOOST_TEST(j["bandwidth_gbps"][1][0] == 2.0);
  BOOST_TEST(j["bandwidth_gbps"][0][0].is_null());
  BOOST_TEST(j["latency_us"][1][0] == 5.0); // latency is one value per pair
  BOOST_TEST(j["flagged"].size() == 1u);
  BOOST_TEST(j["flagged"][0]["retest"] == "confirmed");
  BOOST_TEST(j["verdict"] == "flagged");
  std::ostringstream table;
  print_table(table, r);
  BOOST_TEST(table.str().find("FLAGGED bandwidth 1 -> 0") != std::string::npos, table.str());
  BOOST_TEST(table.str().find("verdict: 1 measurement(s) flagged") != std::string::npos);
}
