// flow rule -> ibv_create_flow attribute bytes: sizes, order, byte order, masks, implicit fields.
#define BOOST_TEST_MODULE raw_verbs_flow
#include <boost/test/unit_test.hpp>

#include "raw/verbs_flow.hpp"

#include <cstring>
#include <vector>

using namespace asio_rdma;
using asio_rdma::detail::build_verbs_flow;

namespace {

std::vector<std::uint8_t> bytes_of(const detail::verbs_flow_attr& attr) {
  auto b = attr.bytes();
  return {reinterpret_cast<const std::uint8_t*>(b.data()),
          reinterpret_cast<const std::uint8_t*>(b.data()) + b.size()};
}

template <typename Spec> Spec spec_at(const std::vector<std::uint8_t>& b, std::size_t offset) {
  Spec s;
  BOOST_REQUIRE(offset + sizeof s <= b.size());
  std::memcpy(&s, b.data() + offset, sizeof s);
  return s;
}

std::vector<std::uint8_t> raw(const void* p, std::size_t n) {
  auto* c = static_cast<const std::uint8_t*>(p);
  return {c, c + n};
}

} // namespace

BOOST_AUTO_TEST_CASE(empty_rule_is_one_eth_spec_with_zero_masks) {
  const auto attr = build_verbs_flow(flow_rule{}, 1);
  const auto b = bytes_of(attr);
  BOOST_TEST(b.size() == sizeof(ibv_flow_attr) + sizeof(ibv_flow_spec_eth));
  BOOST_TEST(attr.get()->size == b.size());
  BOOST_TEST(attr.get()->num_of_specs == 1);
  BOOST_TEST(attr.get()->type == IBV_FLOW_ATTR_NORMAL);
  BOOST_TEST(attr.get()->port == 1);
  BOOST_TEST(attr.get()->priority == 0);
  BOOST_TEST(attr.get()->comp_mask == 0u);
  BOOST_TEST(attr.get()->flags == 0u);
  const auto eth = spec_at<ibv_flow_spec_eth>(b, sizeof(ibv_flow_attr));
  BOOST_TEST(eth.type == IBV_FLOW_SPEC_ETH);
  BOOST_TEST(eth.size == sizeof(ibv_flow_spec_eth));
  const auto mask = raw(&eth.mask, sizeof eth.mask);
  BOOST_TEST(mask == std::vector<std::uint8_t>(sizeof eth.mask, 0),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(full_udp_rule_has_eth_ipv4_udp_specs_in_network_order) {
  flow_rule rule;
  rule.destination_mac = parse_mac_address("01:00:5e:01:02:03");
  rule.source_mac = parse_mac_address("02:00:00:00:00:aa");
  rule.vlan_id = 0x123;
  rule.ipv4_source = parse_ipv4_address("192.0.2.1");
  rule.ipv4_destination = parse_ipv4_address("239.1.2.3");
  rule.protocol = ip_protocol::udp;
  rule.source_port = 0x1234;
  rule.destination_port = 4791;
  error_code ec;
  const auto attr = build_verbs_flow(normalize(rule, ec), 2, 7);
  BOOST_REQUIRE(!ec);
  const auto b = bytes_of(attr);
  const std::size_t eth_at = sizeof(ibv_flow_attr);
  const std::size_t ip_at = eth_at + sizeof(ibv_flow_spec_eth);
  const std::size_t l4_at = ip_at + sizeof(ibv_flow_spec_ipv4);
  BOOST_TEST(b.size() == l4_at + sizeof(ibv_flow_spec_tcp_udp));
  BOOST_TEST(attr.get()->size == b.size());
  BOOST_TEST(attr.get()->num_of_specs == 3);
  BOOST_TEST(attr.get()->port == 2);
  BOOST_TEST(attr.get()->priority == 7);

  const auto eth = spec_at<ibv_flow_spec_eth>(b, eth_at);
  BOOST_TEST(eth.type == IBV_FLOW_SPEC_ETH);
  BOOST_TEST(raw(eth.val.dst_mac, 6) == (std::vector<std::uint8_t>{1, 0, 0x5e, 1, 2, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(eth.mask.dst_mac, 6) == std::vector<std::uint8_t>(6, 0xff),
             boost::test_tools::per_element());
  BOOST_TEST(raw(eth.val.src_mac, 6) == (std::vector<std::uint8_t>{2, 0, 0, 0, 0, 0xaa}),
             boost::test_tools::per_element());
  // Ethertype and VLAN tag as they appear on the wire: big-endian bytes.
  BOOST_TEST(raw(&eth.val.ether_type, 2) == (std::vector<std::uint8_t>{0x08, 0x00}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(&eth.mask.ether_type, 2) == (std::vector<std::uint8_t>{0xff, 0xff}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(&eth.val.vlan_tag, 2) == (std::vector<std::uint8_t>{0x01, 0x23}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(&eth.mask.vlan_tag, 2) == (std::vector<std::uint8_t>{0x0f, 0xff}),
             boost::test_tools::per_element());

  const auto ip = spec_at<ibv_flow_spec_ipv4>(b, ip_at);
  BOOST_TEST(ip.type == IBV_FLOW_SPEC_IPV4);
  BOOST_TEST(ip.size == sizeof(ibv_flow_spec_ipv4));
  BOOST_TEST(raw(&ip.val.src_ip, 4) == (std::vector<std::uint8_t>{192, 0, 2, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(&ip.val.dst_ip, 4) == (std::vector<std::uint8_t>{239, 1, 2, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(ip.mask.src_ip == 0xffffffffu);
  BOOST_TEST(ip.mask.dst_ip == 0xffffffffu);

  const auto l4 = spec_at<ibv_flow_spec_tcp_udp>(b, l4_at);
  BOOST_TEST(l4.type == IBV_FLOW_SPEC_UDP);
  BOOST_TEST(l4.size == sizeof(ibv_flow_spec_tcp_udp));
  BOOST_TEST(raw(&l4.val.src_port, 2) == (std::vector<std::uint8_t>{0x12, 0x34}),
             boost::test_tools::per_element());
  BOOST_TEST(raw(&l4.val.dst_port, 2) == (std::vector<std::uint8_t>{0x12, 0xb7}),
             boost::test_tools::per_element());
  BOOST_TEST(l4.mask.src_port == 0xffff);
  BOOST_TEST(l4.mask.dst_port == 0xffff);
}

BOOST_AUTO_TEST_CASE(ipv4_field_implies_ethertype_even_unnormalized) {
  flow_rule rule;
  rule.ipv4_destination = parse_ipv4_address("192.0.2.2");
  const auto attr = build_verbs_flow(rule, 1);
  const auto b = bytes_of(attr);
  BOOST_TEST(attr.get()->num_of_specs == 2);
  const auto eth = spec_at<ibv_flow_spec_eth>(b, sizeof(ibv_flow_attr));
  BOOST_TEST(raw(&eth.val.ether_type, 2) == (std::vector<std::uint8_t>{0x08, 0x00}),
             boost::test_tools::per_element());
  const auto ip = spec_at<ibv_flow_spec_ipv4>(b, sizeof(ibv_flow_attr) + sizeof eth);
  BOOST_TEST(ip.mask.src_ip == 0u); // absent: wildcard
  BOOST_TEST(ip.mask.dst_ip == 0xffffffffu);
}

BOOST_AUTO_TEST_CASE(protocol_alone_gives_an_l4_spec_with_zero_masks) {
  flow_rule rule;
  rule.protocol = ip_protocol::tcp;
  const auto attr = build_verbs_flow(rule, 1);
  const auto b = bytes_of(attr);
  BOOST_TEST(attr.get()->num_of_specs == 3);
  const auto l4 = spec_at<ibv_flow_spec_tcp_udp>(
      b, sizeof(ibv_flow_attr) + sizeof(ibv_flow_spec_eth) + sizeof(ibv_flow_spec_ipv4));
  BOOST_TEST(l4.type == IBV_FLOW_SPEC_TCP);
  BOOST_TEST(l4.mask.src_port == 0);
  BOOST_TEST(l4.mask.dst_port == 0);
  const auto ip = spec_at<ibv_flow_spec_ipv4>(b, sizeof(ibv_flow_attr) + sizeof(ibv_flow_spec_eth));
  BOOST_TEST(ip.mask.src_ip == 0u);
  BOOST_TEST(ip.mask.dst_ip == 0u);
}

BOOST_AUTO_TEST_CASE(zero_values_are_real_values) {
  flow_rule rule;
  rule.vlan_id = 0;
  rule.protocol = ip_protocol::udp;
  rule.destination_port = 0;
  rule.ipv4_source = boost::asio::ip::address_v4(0);
  const auto attr = build_verbs_flow(rule, 1);
  const auto b = bytes_of(attr);
  const auto eth = spec_at<ibv_flow_spec_eth>(b, sizeof(ibv_flow_attr));
  BOOST_TEST(eth.val.vlan_tag == 0);
  BOOST_TEST(raw(&eth.mask.vlan_tag, 2) == (std::vector<std::uint8_t>{0x0f, 0xff}),
             boost::test_tools::per_element());
  const auto ip = spec_at<ibv_flow_spec_ipv4>(b, sizeof(ibv_flow_attr) + sizeof eth);
  BOOST_TEST(ip.val.src_ip == 0u);
  BOOST_TEST(ip.mask.src_ip == 0xffffffffu);
  const auto l4 = spec_at<ibv_flow_spec_tcp_udp>(b, sizeof(ibv_flow_attr) + sizeof eth +
                                                        sizeof(ibv_flow_spec_ipv4));
  BOOST_TEST(l4.val.dst_port == 0);
  BOOST_TEST(l4.mask.dst_port == 0xffff);
  BOOST_TEST(l4.mask.src_port == 0);
}
