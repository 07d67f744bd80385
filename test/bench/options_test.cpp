// rdma_bench's command line and wire parameters (no device needed).
#define BOOST_TEST_MODULE bench_options
#include <boost/test/unit_test.hpp>

#include "cli.hpp"
#include "measurement.hpp"
#include "options.hpp"
#include "results.hpp"
#include "wire.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace rdma_bench;

namespace {

settings parse(std::vector<std::string> args) {
  args.insert(args.begin(), "rdma_bench");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

bool rejects(std::vector<std::string> args, const std::string& fragment) {
  try {
    parse(std::move(args));
  } catch (const asio_rdma::cli::usage_error& e) {
    BOOST_TEST_MESSAGE(e.what());
    return std::string(e.what()).find(fragment) != std::string::npos;
  }
  return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(client_options_are_parsed) {
  auto s = parse({"client",   "192.0.2.1",  "--op",   "read",     "--mode", "lat",     "--sizes",
                  "8,4k,1m",  "--duration", "1.5",    "--warmup", "0",      "--depth", "32",
                  "--inline", "0",          "--json", "out.json", "--port", "9000"});
  BOOST_TEST(s.role == "client");
  BOOST_TEST(s.host == "192.0.2.1");
  BOOST_TEST(s.port == 9000);
  BOOST_TEST((s.op == operation::read));
  BOOST_TEST((s.mode == test_mode::latency));
  BOOST_TEST((s.sizes == std::vector<std::size_t>{8, 4096, 1 << 20}));
  BOOST_TEST(s.duration == 1.5);
  BOOST_TEST(s.warmup == 0.0);
  BOOST_TEST(s.depth == 32u);
  BOOST_TEST(s.inline_size == 0u);
  BOOST_TEST(s.json_path == "out.json");
}

BOOST_AUTO_TEST_CASE(siw_zero_copy_and_statistics_are_client_flags) {
  auto s = parse({"client", "h", "--siw-zero-copy", "--statistics"});
  BOOST_TEST(s.siw_zero_copy);
  BOOST_TEST(s.statistics);
  auto d = parse({"client", "h"});
  BOOST_TEST(!d.siw_zero_copy);
  BOOST_TEST(!d.statistics);
}

BOOST_AUTO_TEST_CASE(all_sweeps_powers_of_two) {
  auto s = parse({"client", "h", "--all"});
  BOOST_TEST(s.sizes.front() == 2u);
  BOOST_TEST(s.sizes.back() == 8u << 20);
  BOOST_TEST(s.sizes.size() == 23u);
}

BOOST_AUTO_TEST_CASE(raw_verbs_defaults_to_busy_polling) {
  BOOST_TEST((parse({"client", "h", "--raw-verbs"}).completion == completion_mode::busy));
  BOOST_TEST((parse({"client", "h", "--raw-verbs", "--completion", "event"}).completion ==
              completion_mode::event));
  BOOST_TEST((parse({"client", "h"}).completion == completion_mode::event));
}

BOOST_AUTO_TEST_CASE(size_options_exclude_each_other) {
  BOOST_TEST(rejects({"client", "h", "--size", "8", "--all"}, "excludes"));
  BOOST_TEST(rejects({"client", "h", "--sizes", "8,16", "--size", "8"}, "excludes"));
}

BOOST_AUTO_TEST_CASE(help_is_not_an_error) {
  BOOST_TEST(parse({"--help"}).role == "help");
  BOOST_TEST(parse({"client", "--help"}).role == "help");
}

BOOST_AUTO_TEST_CASE(bad_options_say_why) {
  BOOST_TEST(rejects({}, "subcommand is required"));
  BOOST_TEST(rejects({"client"}, "HOST is required"));
  BOOST_TEST(rejects({"client", "h", "--size"}, "--size: 1 required"));
  BOOST_TEST(rejects({"client", "h", "--size", "0"}, "out of range"));
  BOOST_TEST(rejects({"client", "h", "--sizes", "8,,16"}, "is not a number"));
  BOOST_TEST(rejects({"client", "h", "--mode", "fast"}, "not bw or lat"));
  BOOST_TEST(rejects({"client", "h", "--warmup", "-1"}, "out of range"));
  BOOST_TEST(rejects({"client", "h", "--op", "compare_swap"}, "8 bytes"));
  BOOST_TEST(rejects({"client", "h", "--raw-verbs", "--connections", "2"}, "one connection"));
  BOOST_TEST(rejects({"client", "h", "--mode", "lat", "--connections", "2"}, "one connection"));
  BOOST_TEST(rejects({"client", "h", "--raw-verbs", "--shared-queues"}, "not --raw-verbs"));
  BOOST_TEST(rejects({"client", "h", "--raw-verbs", "--statistics"}, "not --raw-verbs"));
  BOOST_TEST(rejects({"client", "h", "--raw-verbs", "--siw-zero-copy"}, "asio_rdma connections"));
  BOOST_TEST(rejects({"client", "h", "--op", "ud_send", "--shared-queues"}, "not ud_send"));
  BOOST_TEST(rejects({"client", "h", "--batch", "16", "--raw-verbs"}, "posts lists of its own"));
  BOOST_TEST(rejects({"client", "h", "--batch", "16", "--mode", "lat"}, "not latency"));
  BOOST_TEST(rejects({"client", "h", "--batch", "4", "--op", "fetch_add", "--size", "8"},
                     "send, write, write_imm or read"));
  BOOST_TEST(rejects({"client", "h", "--batch", "32", "--depth", "16"}, "may not exceed --depth"));
  BOOST_TEST(rejects({"client", "h", "--batch", "0"}, "out of range"));
  BOOST_TEST(rejects({"client", "h", "--lat-send", "later"}, "not await or post"));
  BOOST_TEST(rejects({"client", "h", "--lat-send", "post"}, "ping-pong latency"));
  BOOST_TEST(rejects({"client", "h", "--lat-send", "post", "--mode", "lat", "--op", "read"},
                     "ping-pong latency"));
  BOOST_TEST(parse({"client", "h", "--lat-send", "post", "--mode", "lat"}).lat_post_send);
  BOOST_TEST(rejects({"client", "h", "--send-completion", "later"}, "not post or ack"));
  BOOST_TEST(rejects({"client", "h", "--send-completion", "ack", "--raw-verbs"},
                     "applies to asio_rdma connections"));
  BOOST_TEST(!parse({"client", "h"}).acknowledged_sends);
  BOOST_TEST(parse({"client", "h", "--send-completion", "ack"}).acknowledged_sends);
  BOOST_TEST(rejects({"client", "h", "--send-from", "stack"}, "not registered or copied"));
  BOOST_TEST(rejects({"client", "h", "--send-from", "copied", "--raw-verbs"},
                     "applies to --op send on asio_rdma"));
  BOOST_TEST(rejects({"client", "h", "--send-from", "copied", "--op", "write"},
                     "applies to --op send on asio_rdma"));
  BOOST_TEST(rejects({"client", "h", "--send-from", "copied", "--batch", "4"}, "drop --batch"));
  BOOST_TEST(!parse({"client", "h"}).copied_sends);
  BOOST_TEST(parse({"client", "h", "--send-from", "copied"}).copied_sends);
  BOOST_TEST(rejects({"client", "h", "--asio-floor"}, "applies to --raw-verbs --op send"));
  BOOST_TEST(rejects({"client", "h", "--asio-floor", "--raw-verbs"},
                     "applies to --raw-verbs --op send --mode lat"));
  BOOST_TEST(rejects({"client", "h", "--asio-floor", "--raw-verbs", "--mode", "lat", "--op",
                      "write"},
                     "applies to --raw-verbs --op send --mode lat"));
  BOOST_TEST(!parse({"client", "h", "--raw-verbs", "--mode", "lat"}).asio_floor);
  BOOST_TEST(parse({"client", "h", "--raw-verbs", "--mode", "lat", "--asio-floor"}).asio_floor);
  BOOST_TEST(parse({"client", "h", "--raw-verbs", "--mode", "lat", "--asio-floor", "--completion",
                    "event"})
                 .asio_floor);
  BOOST_TEST(rejects({"client", "h", "extra"}, "not expected: extra"));
  BOOST_TEST(rejects({"server", "--op", "send"}, "not expected"));
}

BOOST_AUTO_TEST_CASE(parameters_round_trip_in_the_private_data) {
  test_parameters t;
  t.op = operation::write_imm;
  t.mode = test_mode::latency;
  t.bidirectional = true;
  t.event_completion = true;
  t.post_answers = true;
  t.acknowledged_sends = true;
  t.copied_sends = true;
  t.asio_floor = true;
  t.depth = 300;
  t.size = 65536;
  t.inline_size = 128;
  t.adaptive_spin_us = 10;
  auto bytes = encode(t);
  static_assert(bytes.size() <= 56, "connect private data holds 56 bytes");
  std::string problem;
  auto back = decode(bytes, problem);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST((back->op == t.op && back->mode == t.mode));
  BOOST_TEST(back->bidirectional);
  BOOST_TEST(back->event_completion);
  BOOST_TEST(!back->adaptive_completion);
  BOOST_TEST(back->post_answers);
  BOOST_TEST(back->acknowledged_sends);
  BOOST_TEST(back->copied_sends);
  BOOST_TEST(back->asio_floor);
  BOOST_TEST(back->depth == 300);
  BOOST_TEST(back->size == 65536u);
  BOOST_TEST(back->inline_size == 128u);
  BOOST_TEST(back->adaptive_spin_us == 10u);
}

BOOST_AUTO_TEST_CASE(adaptive_spin_reaches_both_ends_options) {
  auto s = parse({"client", "h", "--op", "stream", "--completion", "adaptive", "--adaptive-spin",
                  "10"});
  BOOST_TEST(s.adaptive_spin_us == 10u);
  const auto t = parameters_for(s, 64);
  asio_rdma::connection_options o;
  apply_completion(t, o);
  BOOST_TEST((o.completion_mode == asio_rdma::completion_mode::adaptive));
  BOOST_TEST(o.adaptive_spin.count() == 10);
  // Not given: the library's default stays.
  const asio_rdma::connection_options defaults;
  asio_rdma::connection_options unset;
  apply_completion(parameters_for(parse({"client", "h", "--completion", "adaptive"}), 64), unset);
  BOOST_TEST(unset.adaptive_spin.count() == defaults.adaptive_spin.count());
  BOOST_TEST(rejects({"client", "h", "--adaptive-spin", "10"}, "applies to --completion adaptive"));
  BOOST_TEST(rejects({"client", "h", "--completion", "adaptive", "--adaptive-spin", "0"},
                     "out of range"));
  BOOST_TEST(rejects({"client", "h", "--op", "ud_send", "--completion", "adaptive",
                      "--adaptive-spin", "10"},
                     "not ud_send"));
}

BOOST_AUTO_TEST_CASE(bad_parameters_are_refused_with_a_reason) {
  std::string problem;
  std::array<std::byte, 56> zeros{};
  BOOST_TEST(!decode(zeros, problem).has_value());
  BOOST_TEST(problem.find("not an rdma_bench client") != std::string::npos);
  auto bytes = encode(test_parameters{});
  bytes[2] = std::byte{9};
  BOOST_TEST(!decode(bytes, problem).has_value());
  BOOST_TEST(problem.find("version 9") != std::string::npos);
  bytes = encode(test_parameters{}); // size 0
  BOOST_TEST(!decode(bytes, problem).has_value());
  BOOST_TEST(!decode(std::span(bytes.data(), 10), problem).has_value());
}

BOOST_AUTO_TEST_CASE(buffer_description_round_trips) {
  buffer_description b{0x7fff12345678, 0xdeadbeef, 1ull << 33};
  std::byte bytes[buffer_description::encoded_size];
  encode(b, bytes);
  auto back = decode_buffer(bytes);
  BOOST_TEST(back.address == b.address);
  BOOST_TEST(back.rkey == b.rkey);
  BOOST_TEST(back.length == b.length);
}

BOOST_AUTO_TEST_CASE(json_results_are_valid_json_with_names_quoted) {
  auto s = parse({"client", "host\"with\\odd\tchars", "--mode", "lat", "--sizes", "8,16"});
  result r;
  r.size = 8;
  r.iterations = 1000;
  r.seconds = 0.5;
  r.latencies_us = {1.0, 2.0, 3.0};
  r.finish();
  auto path = (std::filesystem::temp_directory_path() / "bench_options_test.json").string();
  write_json(path, s, "rxe\"0", {r});
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in); // throws if not valid JSON
  std::filesystem::remove(path);
  BOOST_TEST(doc["device"] == "rxe\"0");
  BOOST_TEST(doc["parameters"]["host"] == "host\"with\\odd\tchars");
  BOOST_TEST(doc["parameters"]["mode"] == "lat");
  BOOST_TEST(doc["results"].size() == 1u);
  BOOST_TEST(doc["results"][0]["iterations"] == 1000);
  BOOST_TEST(doc["results"][0]["lat_max_us"] == 3.0);
  BOOST_TEST(doc["results"][0]["lat_p50_us"] == 2.0);
  r.latencies_us = {1.0, 1.0, 7.0}; // a tail moves the mean, not the median
  r.finish();
  BOOST_TEST(r.mean() == 3.0);
  BOOST_TEST(r.quantile(0.5) == 1.0);
}
