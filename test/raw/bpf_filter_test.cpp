// flow rules -> BPF, checked against a reference matcher that reads wire frames (tags in the
// data) while the program runs on the kernel's view (tag in metadata), on a generated set of
// frames: with and without VLAN tags (also two), IP options, fragments, other protocols,
// other ethertypes and truncated frames.
#define BOOST_TEST_MODULE raw_bpf_filter
#include <boost/test/unit_test.hpp>

#include "bpf_interpreter.hpp"
#include "frames.hpp"
#include "reference_match.hpp"
#include "raw/bpf_filter.hpp"

#include <random>

using namespace asio_rdma;
using raw_test::frame_spec;
using raw_test::get16;
using raw_test::kernel_view;
using raw_test::reference_match;

namespace {

constexpr std::uint32_t snap = 2048;

const mac_address macs[] = {{{0x02, 0, 0, 0, 0, 0xaa}},
                            {{0x02, 0, 0, 0, 0, 0xbb}},
                            {{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}},
                            mac_address::broadcast()};
const std::uint32_t ips[] = {0xc0000201, 0xc0000202, 0xef010203, 0};
const std::uint16_t ports[] = {0, 53, 5000, 4791};
const std::uint16_t vids[] = {0, 5, 100, 4095};
const std::uint16_t ethertypes[] = {ethertype::ipv4, ethertype::ipv4, ethertype::ipv4,
                                    ethertype::arp,  ethertype::ipv6, 0x88b5};
const std::uint8_t protocols[] = {17, 17, 6, 1, 0};
const std::uint16_t fragments[] = {0, 0, 0x4000, 0x2000, 0x2001, 0x00b9, 0x1000, 0x3400};

template <typename T, std::size_t N> const T& pick(std::mt19937& rng, const T (&a)[N]) {
  return a[std::uniform_int_distribution<std::size_t>(0, N - 1)(rng)];
}

std::vector<std::vector<std::uint8_t>> generate_frames(std::mt19937& rng, std::size_t count) {
  std::vector<std::vector<std::uint8_t>> frames;
  std::bernoulli_distribution coin(0.5), rare(0.15);
  while (frames.size() < count) {
    frame_spec s;
    s.destination = pick(rng, macs);
    s.source = pick(rng, macs);
    if (coin(rng))
      s.vlan_tci = static_cast<std::uint16_t>(pick(rng, vids) | (rare(rng) ? 0xa000 : 0));
    if (s.vlan_tci && rare(rng))
      s.inner_vlan_tci = pick(rng, vids);
    s.ethertype = pick(rng, ethertypes);
    s.ip_source = pick(rng, ips);
    s.ip_destination = pick(rng, ips);
    s.protocol = pick(rng, protocols);
    s.ip_header_words = rare(rng) ? 6 : 5;
    s.fragment = pick(rng, fragments);
    s.source_port = pick(rng, ports);
    s.destination_port = pick(rng, ports);
    auto frame = raw_test::build_frame(s);
    if (rare(rng)) // truncated: anywhere from an empty to a nearly complete frame
      frame.resize(std::uniform_int_distribution<std::size_t>(0, frame.size())(rng));
    // The kernel drops a tagged frame too short to untag before any socket sees it.
    if (frame.size() >= 14 && get16(&frame[12]) == 0x8100 && frame.size() < 18)
      continue;
    frames.push_back(std::move(frame));
  }
  return frames;
}

flow_rule random_rule(std::mt19937& rng) {
  std::bernoulli_distribution some(0.3);
  flow_rule r;
  if (some(rng))
    r.destination_mac = pick(rng, macs);
  if (some(rng))
    r.source_mac = pick(rng, macs);
  if (some(rng))
    r.vlan_id = pick(rng, vids);
  if (some(rng))
    r.ipv4_source = boost::asio::ip::address_v4(pick(rng, ips));
  if (some(rng))
    r.ipv4_destination = boost::asio::ip::address_v4(pick(rng, ips));
  if (some(rng))
    r.protocol = std::bernoulli_distribution(0.7)(rng) ? ip_protocol::udp : ip_protocol::tcp;
  if (r.protocol && some(rng))
    r.source_port = pick(rng, ports);
  if (r.protocol && std::bernoulli_distribution(0.5)(rng))
    r.destination_port = pick(rng, ports);
  if (!r.protocol && !r.ipv4_source && !r.ipv4_destination && some(rng))
    r.ethertype = pick(rng, ethertypes);
  error_code ec;
  r = normalize(r, ec);
  BOOST_REQUIRE(!ec);
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(no_rules_rejects_everything) {
  std::mt19937 rng(1);
  const auto program = detail::compile_flow_filter({}, snap);
  for (const auto& frame : generate_frames(rng, 200))
    BOOST_TEST(raw_test::run_bpf(program, kernel_view(frame)) == 0u);
  BOOST_TEST(raw_test::run_bpf(detail::reject_all_filter(),
                               kernel_view(generate_frames(rng, 1)[0])) == 0u);
}

BOOST_AUTO_TEST_CASE(empty_rule_accepts_everything) {
  std::mt19937 rng(2);
  const std::vector<flow_rule> rules{flow_rule{}};
  const auto program = detail::compile_flow_filter(rules, snap);
  for (const auto& frame : generate_frames(rng, 200))
    BOOST_TEST(raw_test::run_bpf(program, kernel_view(frame)) == snap);
}

BOOST_AUTO_TEST_CASE(agrees_with_the_reference_on_every_generated_frame) {
  std::mt19937 rng(20240601);
  const auto frames = generate_frames(rng, 1500);
  std::size_t matched = 0, compared = 0, disagreements = 0;
  for (int set = 0; set < 300; ++set) {
    std::vector<flow_rule> rules;
    const int count = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int i = 0; i < count; ++i)
      rules.push_back(random_rule(rng));
    const auto program = detail::compile_flow_filter(rules, snap);
    BOOST_REQUIRE(program.size() <= rules.size() * detail::max_bpf_instructions_per_rule + 1);
    for (const auto& frame : frames) {
      const bool expected = reference_match(rules, frame);
      const std::uint32_t verdict = raw_test::run_bpf(program, kernel_view(frame));
      ++compared;
      matched += expected;
      if ((verdict != 0) != expected || (verdict != 0 && verdict != snap)) {
        if (++disagreements <= 5) {
          std::string text;
          for (const auto& r : rules)
            text += "[" + to_string(r) + "] ";
          BOOST_ERROR("disagreement on a " << frame.size() << "-byte frame, rules " << text
                                           << "expected " << expected);
        }
      }
    }
  }
  BOOST_TEST(disagreements == 0u);
  // The generator must exercise both outcomes substantially.
  BOOST_TEST(matched > compared / 50);
  BOOST_TEST(matched < compared / 2);
  BOOST_TEST_MESSAGE(compared << " verdicts compared, " << matched << " matches");
}

BOOST_AUTO_TEST_CASE(hand_picked_cases) {
  flow_rule udp5000;
  udp5000.protocol = ip_protocol::udp;
  udp5000.destination_port = 5000;
  error_code ec;
  udp5000 = normalize(udp5000, ec);
  flow_rule vlan7;
  vlan7.vlan_id = 7;
  const std::vector<flow_rule> rules{udp5000, vlan7};
  const auto program = detail::compile_flow_filter(rules, snap);
  auto verdict = [&](const frame_spec& s) {
    return raw_test::run_bpf(program, kernel_view(raw_test::build_frame(s))) != 0;
  };
  frame_spec s;
  BOOST_TEST(verdict(s)); // UDP to 5000
  s.destination_port = 5001;
  BOOST_TEST(!verdict(s));
  s.vlan_tci = 7;
  BOOST_TEST(verdict(s)); // any frame on VLAN 7
  s.vlan_tci = 0x2007;    // priority bits are ignored
  BOOST_TEST(verdict(s));
  s.vlan_tci = 8;
  BOOST_TEST(!verdict(s));
  s = {};
  s.fragment = 0x0010; // a later fragment: no ports to match
  BOOST_TEST(!verdict(s));
  s.fragment = 0x2000; // first fragment: has the UDP header
  BOOST_TEST(verdict(s));
  s = {};
  s.ip_header_words = 7; // options shift the ports
  BOOST_TEST(verdict(s));
  s = {};
  s.protocol = 6; // TCP to 5000
  BOOST_TEST(!verdict(s));
  // A frame too short for rule 1 can still match rule 2.
  frame_spec tagged_short;
  tagged_short.vlan_tci = 7;
  tagged_short.ethertype = 0x88b5;
  auto frame = raw_test::build_frame(tagged_short);
  frame.resize(20);
  BOOST_TEST(raw_test::run_bpf(program, kernel_view(frame)) == snap);
}

BOOST_AUTO_TEST_CASE(the_largest_rule_set_fits_a_kernel_program) {
  flow_rule everything;
  everything.destination_mac = mac_address::broadcast();
  everything.source_mac = mac_address::broadcast();
  everything.vlan_id = 1;
  everything.ipv4_source = boost::asio::ip::address_v4(1);
  everything.ipv4_destination = boost::asio::ip::address_v4(2);
  everything.protocol = ip_protocol::tcp;
  everything.source_port = 1;
  everything.destination_port = 2;
  error_code ec;
  everything = normalize(everything, ec);
  const std::vector<flow_rule> rules(64, everything);
  const auto program = detail::compile_flow_filter(rules, snap);
  BOOST_TEST(program.size() <= std::size_t{BPF_MAXINSNS});
  BOOST_TEST(program.size() <= 64 * detail::max_bpf_instructions_per_rule + 1);
}
