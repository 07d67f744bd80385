#include "raw/verbs_flow.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace asio_rdma::detail {
namespace {

void set_mac(std::uint8_t (&value)[6], std::uint8_t (&mask)[6],
             const std::optional<mac_address>& mac) {
  if (!mac)
    return;
  std::memcpy(value, mac->bytes.data(), 6);
  std::memset(mask, 0xff, 6);
}

template <typename T>
void set16(std::uint16_t& value, std::uint16_t& mask, const std::optional<T>& field,
           std::uint16_t field_mask) {
  if (!field)
    return;
  value = htons(static_cast<std::uint16_t>(*field));
  mask = htons(field_mask);
}

void set_ip(std::uint32_t& value, std::uint32_t& mask,
            const std::optional<boost::asio::ip::address_v4>& address) {
  if (!address)
    return;
  value = htonl(address->to_uint());
  mask = 0xffffffffu;
}

} // namespace

verbs_flow_attr build_verbs_flow(const flow_rule& rule, std::uint8_t port, std::uint16_t priority) {
  const bool has_ipv4 = rule.ipv4_source || rule.ipv4_destination || rule.protocol;
  const bool has_l4 = rule.protocol.has_value();

  ibv_flow_attr attr{};
  ibv_flow_spec_eth eth{};
  ibv_flow_spec_ipv4 ipv4{};
  ibv_flow_spec_tcp_udp l4{};

  eth.type = IBV_FLOW_SPEC_ETH;
  eth.size = sizeof eth;
  set_mac(eth.val.dst_mac, eth.mask.dst_mac, rule.destination_mac);
  set_mac(eth.val.src_mac, eth.mask.src_mac, rule.source_mac);
  // An IPv4 spec implies ethertype 0x0800; normalize() has already made it explicit, but the
  // function stays correct for a rule that skipped it.
  std::optional<std::uint16_t> ether = rule.ethertype;
  if (has_ipv4)
    ether = ethertype::ipv4;
  set16(eth.val.ether_type, eth.mask.ether_type, ether, 0xffff);
  set16(eth.val.vlan_tag, eth.mask.vlan_tag, rule.vlan_id, 0x0fff);

  std::size_t size = sizeof attr + sizeof eth;
  std::uint8_t specs = 1;
  if (has_ipv4) {
    ipv4.type = IBV_FLOW_SPEC_IPV4;
    ipv4.size = sizeof ipv4;
    set_ip(ipv4.val.src_ip, ipv4.mask.src_ip, rule.ipv4_source);
    set_ip(ipv4.val.dst_ip, ipv4.mask.dst_ip, rule.ipv4_destination);
    size += sizeof ipv4;
    ++specs;
  }
  if (has_l4) {
    l4.type = *rule.protocol == ip_protocol::udp ? IBV_FLOW_SPEC_UDP : IBV_FLOW_SPEC_TCP;
    l4.size = sizeof l4;
    set16(l4.val.src_port, l4.mask.src_port, rule.source_port, 0xffff);
    set16(l4.val.dst_port, l4.mask.dst_port, rule.destination_port, 0xffff);
    size += sizeof l4;
    ++specs;
  }

  attr.comp_mask = 0;
  attr.type = IBV_FLOW_ATTR_NORMAL;
  attr.size = static_cast<std::uint16_t>(size);
  attr.priority = priority;
  attr.num_of_specs = specs;
  attr.port = port;
  attr.flags = 0;

  verbs_flow_attr out;
  out.storage_.assign((size + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t), 0);
  out.size_ = size;
  auto* p = reinterpret_cast<std::byte*>(out.storage_.data());
  std::memcpy(p, &attr, sizeof attr);
  p += sizeof attr;
  std::memcpy(p, &eth, sizeof eth);
  p += sizeof eth;
  if (has_ipv4) {
    std::memcpy(p, &ipv4, sizeof ipv4);
    p += sizeof ipv4;
  }
  if (has_l4)
    std::memcpy(p, &l4, sizeof l4);
  return out;
}

} // namespace asio_rdma::detail
