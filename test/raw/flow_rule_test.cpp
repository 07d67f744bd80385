// flow_rule: parsing helpers, normalization (implicit fields, rejected combinations), text.
#define BOOST_TEST_MODULE raw_flow_rule
#include <boost/test/unit_test.hpp>

#include <asio_rdma/flow_rule.hpp>

#include <boost/asio/error.hpp>

#include <boost/system/system_error.hpp>

using namespace asio_rdma;

BOOST_AUTO_TEST_CASE(parses_mac_addresses) {
  const auto mac = parse_mac_address("01:80:c2:00:00:00");
  BOOST_TEST((mac.bytes == std::array<std::uint8_t, 6>{0x01, 0x80, 0xc2, 0, 0, 0}));
  BOOST_TEST(mac.is_multicast());
  BOOST_TEST(to_string(mac) == "01:80:c2:00:00:00");
  BOOST_TEST(parse_mac_address("02-AB-cd-0-1-ff") ==
             (mac_address{{0x02, 0xab, 0xcd, 0x00, 0x01, 0xff}}));
  BOOST_TEST(!parse_mac_address("02:00:00:00:00:01").is_multicast());
}

BOOST_AUTO_TEST_CASE(rejects_bad_mac_text_with_a_clear_error) {
  for (const char* bad :
       {"", "01:80:c2:00:00", "01:80:c2:00:00:00:00", "01:80:c2:00:00:0g", "001:80:c2:00:00:00",
        "01::c2:00:00:00", "01:80:c2:00:00:00 ", "0180c2000000"}) {
    error_code ec;
    parse_mac_address(bad, ec);
    BOOST_TEST(ec == boost::asio::error::invalid_argument, "accepted \"" << bad << "\"");
  }
  try {
    parse_mac_address("01:80:zz:00:00:00");
    BOOST_FAIL("no exception");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST(e.code() == boost::asio::error::invalid_argument);
    BOOST_TEST(std::string(e.what()).find("01:80:zz:00:00:00") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(parses_dotted_ipv4) {
  BOOST_TEST(parse_ipv4_address("192.0.2.1").to_uint() == 0xc0000201u);
  BOOST_TEST(parse_ipv4_address("0.0.0.0").to_uint() == 0u);
  BOOST_TEST(parse_ipv4_address("255.255.255.255").to_uint() == 0xffffffffu);
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4 ", "1..2.3",
                          "01234.1.1.1", "a.b.c.d", "1.2.3.-4", "0x7f.0.0.1"}) {
    error_code ec;
    parse_ipv4_address(bad, ec);
    BOOST_TEST(ec == boost::asio::error::invalid_argument, "accepted \"" << bad << "\"");
  }
  BOOST_CHECK_THROW(parse_ipv4_address("1.2.3.999"), boost::system::system_error);
}

BOOST_AUTO_TEST_CASE(normalize_makes_implicit_fields_explicit) {
  error_code ec;
  flow_rule rule;
  rule.ipv4_destination = parse_ipv4_address("192.0.2.9");
  auto n = normalize(rule, ec);
  BOOST_TEST(!ec);
  BOOST_TEST(n.ethertype.value() == ethertype::ipv4);

  flow_rule by_protocol;
  by_protocol.protocol = ip_protocol::udp;
  by_protocol.destination_port = 0; // 0 is a real port value
  n = normalize(by_protocol, ec);
  BOOST_TEST(!ec);
  BOOST_TEST(n.ethertype.value() == ethertype::ipv4);
  BOOST_TEST(n.destination_port.value() == 0);

  flow_rule mac_only;
  mac_only.destination_mac = mac_address::broadcast();
  n = normalize(mac_only, ec);
  BOOST_TEST(!ec);
  BOOST_TEST(!n.ethertype.has_value());
}

BOOST_AUTO_TEST_CASE(normalize_rejects_contradictions) {
  error_code ec;
  flow_rule port_without_protocol;
  port_without_protocol.destination_port = 53;
  normalize(port_without_protocol, ec);
  BOOST_TEST(ec == errc::invalid_option);

  flow_rule arp_with_ip;
  arp_with_ip.ethertype = ethertype::arp;
  arp_with_ip.ipv4_source = parse_ipv4_address("192.0.2.1");
  normalize(arp_with_ip, ec);
  BOOST_TEST(ec == errc::invalid_option);

  flow_rule big_vlan;
  big_vlan.vlan_id = 4096;
  normalize(big_vlan, ec);
  BOOST_TEST(ec == errc::invalid_option);
  big_vlan.vlan_id = 4095;
  normalize(big_vlan, ec);
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE(rules_print_readably) {
  flow_rule rule;
  BOOST_TEST(to_string(rule) == "any");
  rule.destination_mac = parse_mac_address("01:80:c2:00:00:00");
  rule.vlan_id = 5;
  rule.protocol = ip_protocol::udp;
  rule.destination_port = 4791;
  BOOST_TEST(to_string(rule) == "dst_mac=01:80:c2:00:00:00 vlan=5 udp dst_port=4791");
}
