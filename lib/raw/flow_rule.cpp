#include <asio_rdma/flow_rule.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <cstdio>
#include <ostream>

namespace asio_rdma {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

[[noreturn]] void throw_bad_text(const char* what, std::string_view text) {
  throw boost::system::system_error(make_error_code(boost::asio::error::invalid_argument),
                                    std::string("not a valid ") + what + ": \"" +
                                        std::string(text) + "\"");
}

} // namespace

mac_address parse_mac_address(std::string_view text, error_code& ec) noexcept {
  mac_address mac;
  std::size_t pos = 0;
  for (std::size_t group = 0; group < 6; ++group) {
    if (group > 0) {
      if (pos >= text.size() || (text[pos] != ':' && text[pos] != '-'))
        return ec = boost::asio::error::invalid_argument, mac_address{};
      ++pos;
    }
    int value = 0;
    std::size_t digits = 0;
    while (pos < text.size() && digits < 3 && hex_value(text[pos]) >= 0) {
      value = value * 16 + hex_value(text[pos]);
      ++pos;
      ++digits;
    }
    if (digits == 0 || digits > 2)
      return ec = boost::asio::error::invalid_argument, mac_address{};
    mac.bytes[group] = static_cast<std::uint8_t>(value);
  }
  if (pos != text.size())
    return ec = boost::asio::error::invalid_argument, mac_address{};
  ec = {};
  return mac;
}

mac_address parse_mac_address(std::string_view text) {
  error_code ec;
  auto mac = parse_mac_address(text, ec);
  if (ec)
    throw_bad_text("MAC address", text);
  return mac;
}

std::string to_string(const mac_address& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac.bytes[0], mac.bytes[1],
                mac.bytes[2], mac.bytes[3], mac.bytes[4], mac.bytes[5]);
  return buf;
}

std::ostream& operator<<(std::ostream& out, const mac_address& mac) {
  return out << to_string(mac);
}

boost::asio::ip::address_v4 parse_ipv4_address(std::string_view text, error_code& ec) noexcept {
  std::uint32_t value = 0;
  std::size_t pos = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (pos >= text.size() || text[pos] != '.')
        return ec = boost::asio::error::invalid_argument, boost::asio::ip::address_v4{};
      ++pos;
    }
    unsigned number = 0;
    std::size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && digits < 4) {
      number = number * 10 + static_cast<unsigned>(text[pos] - '0');
      ++pos;
      ++digits;
    }
    if (digits == 0 || digits > 3 || number > 255)
      return ec = boost::asio::error::invalid_argument, boost::asio::ip::address_v4{};
    value = (value << 8) | number;
  }
  if (pos != text.size())
    return ec = boost::asio::error::invalid_argument, boost::asio::ip::address_v4{};
  ec = {};
  return boost::asio::ip::address_v4(value);
}

boost::asio::ip::address_v4 parse_ipv4_address(std::string_view text) {
  error_code ec;
  auto address = parse_ipv4_address(text, ec);
  if (ec)
    throw_bad_text("dotted IPv4 address", text);
  return address;
}

flow_rule normalize(const flow_rule& rule, error_code& ec) noexcept {
  ec = {};
  if (rule.vlan_id && *rule.vlan_id > 4095)
    return ec = errc::invalid_option, rule;
  if ((rule.source_port || rule.destination_port) && !rule.protocol)
    return ec = errc::invalid_option, rule;
  const bool needs_ipv4 = rule.ipv4_source || rule.ipv4_destination || rule.protocol;
  if (needs_ipv4 && rule.ethertype && *rule.ethertype != ethertype::ipv4)
    return ec = errc::invalid_option, rule;
  flow_rule out = rule;
  if (needs_ipv4)
    out.ethertype = ethertype::ipv4;
  return out;
}

std::string to_string(const flow_rule& rule) {
  std::string out;
  auto add = [&out](const std::string& field) {
    if (!out.empty())
      out += ' ';
    out += field;
  };
  if (rule.destination_mac)
    add("dst_mac=" + to_string(*rule.destination_mac));
  if (rule.source_mac)
    add("src_mac=" + to_string(*rule.source_mac));
  if (rule.ethertype) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(*rule.ethertype));
    add(std::string("ethertype=") + buf);
  }
  if (rule.vlan_id)
    add("vlan=" + std::to_string(*rule.vlan_id));
  if (rule.ipv4_source)
    add("src_ip=" + rule.ipv4_source->to_string());
  if (rule.ipv4_destination)
    add("dst_ip=" + rule.ipv4_destination->to_string());
  if (rule.protocol)
    add(*rule.protocol == ip_protocol::udp ? "udp" : "tcp");
  if (rule.source_port)
    add("src_port=" + std::to_string(*rule.source_port));
  if (rule.destination_port)
    add("dst_port=" + std::to_string(*rule.destination_port));
  return out.empty() ? "any" : out;
}

std::ostream& operator<<(std::ostream& out, const flow_rule& rule) {
  return out << to_string(rule);
}

} // namespace asio_rdma
