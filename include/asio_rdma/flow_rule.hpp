// asio-rdma: flow rules, the description of which received frames a raw_socket delivers.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/ip/address_v4.hpp>

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace asio_rdma {

/// A 48-bit Ethernet (MAC) address, in wire order.
struct mac_address {
  /// The six bytes, first on the wire first.
  std::array<std::uint8_t, 6> bytes{};

  /// Equal if all six bytes are.
  friend bool operator==(const mac_address&, const mac_address&) = default;

  /// True for group (multicast and broadcast) addresses: the low bit of the first byte.
  bool is_multicast() const noexcept { return (bytes[0] & 1u) != 0; }

  /// The broadcast address ff:ff:ff:ff:ff:ff.
  static mac_address broadcast() noexcept { return {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
};

/// Parses "01:80:c2:00:00:00" (also accepts '-' as separator; hex digits in either case;
/// exactly six groups of one or two digits). Sets `ec` to asio::error::invalid_argument on bad
/// text.
mac_address parse_mac_address(std::string_view text, error_code& ec) noexcept;

/// Parses a MAC address; throws boost::system::system_error (invalid_argument, with the
/// offending text in the message) on bad text.
mac_address parse_mac_address(std::string_view text);

/// Formats as "01:80:c2:00:00:00".
std::string to_string(const mac_address& mac);
/// Writes to_string(mac).
std::ostream& operator<<(std::ostream& out, const mac_address& mac);

/// Parses strict dotted-quad IPv4 ("192.0.2.1": four decimal parts 0..255, no leading '+',
/// no shorthand forms). Sets `ec` to asio::error::invalid_argument on bad text.
boost::asio::ip::address_v4 parse_ipv4_address(std::string_view text, error_code& ec) noexcept;

/// Parses dotted-quad IPv4; throws boost::system::system_error (invalid_argument) on bad
/// text.
boost::asio::ip::address_v4 parse_ipv4_address(std::string_view text);

/// The transport protocols a flow rule can match (IPv4 protocol numbers).
enum class ip_protocol : std::uint8_t {
  tcp = 6,
  udp = 17,
};

/// Well-known ethertypes, for convenience.
namespace ethertype {
/// IPv4.
inline constexpr std::uint16_t ipv4 = 0x0800;
/// ARP.
inline constexpr std::uint16_t arp = 0x0806;
/// 802.1Q VLAN tag.
inline constexpr std::uint16_t vlan = 0x8100;
/// IPv6.
inline constexpr std::uint16_t ipv6 = 0x86dd;
} // namespace ethertype

/// Which received frames to deliver. Every field is optional: an absent field matches any
/// value; a present field must match exactly (0 is a real value, not "any").
///
/// Implicit fields follow verbs flow steering: any IPv4 field, `protocol` or a port implies
/// ethertype 0x0800; a port requires `protocol` (a port of "TCP or UDP" cannot be expressed).
/// Ports only match unfragmented frames or the first fragment (later fragments carry no
/// transport header). `vlan_id` matches the 12-bit VLAN identifier of 802.1Q-tagged frames
/// (priority bits ignored); without it, tagged and untagged frames both match.
///
/// A multicast `ipv4_destination` (224.0.0.0/4) makes raw_socket::add_flow / set_flow join
/// that group on the interface for as long as the rule is installed.
struct flow_rule {
  /// The frame's destination MAC address.
  std::optional<mac_address> destination_mac;
  /// The frame's source MAC address.
  std::optional<mac_address> source_mac;
  /// The ethertype (after a VLAN tag, if any).
  std::optional<std::uint16_t> ethertype;
  /// The 12-bit VLAN identifier of a tagged frame.
  std::optional<std::uint16_t> vlan_id;
  /// The IPv4 source address.
  std::optional<boost::asio::ip::address_v4> ipv4_source;
  /// The IPv4 destination address (a multicast group joins it).
  std::optional<boost::asio::ip::address_v4> ipv4_destination;
  /// The IPv4 protocol (TCP or UDP for port matches).
  std::optional<ip_protocol> protocol;
  /// The TCP or UDP source port (needs `protocol`).
  std::optional<std::uint16_t> source_port;
  /// The TCP or UDP destination port (needs `protocol`).
  std::optional<std::uint16_t> destination_port;

  /// Equal if every field is.
  friend bool operator==(const flow_rule&, const flow_rule&) = default;
};

/// Checks a rule and makes its implicit fields explicit (ethertype 0x0800 for IPv4 fields).
/// Errors (errc::invalid_option): vlan_id above 4095; a port without a protocol; an IPv4
/// field or protocol together with an ethertype other than 0x0800. On error the rule is
/// returned unchanged.
flow_rule normalize(const flow_rule& rule, error_code& ec) noexcept;

/// A human-readable form such as "dst_mac=01:80:c2:00:00:00 vlan=5 udp dst_port=4791", for
/// logs and error messages ("any" for the empty rule).
std::string to_string(const flow_rule& rule);
/// Writes to_string(rule).
std::ostream& operator<<(std::ostream& out, const flow_rule& rule);

} // namespace asio_rdma
