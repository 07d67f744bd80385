// The flow rules' specification as a reference matcher that parses wire frames
// (VLAN tags in the data), written independently of the BPF compiler, and the
// AF_PACKET view of a wire frame (outer tag moved to metadata) that the
// compiled programs see. Used by bpf_filter_test and the flow_rule fuzz
// target. Test-only.
#pragma once

#include "bpf_interpreter.hpp"
#include "frames.hpp"

#include <asio_rdma/flow_rule.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace raw_test {

using asio_rdma::flow_rule;
using asio_rdma::mac_address;

// The specification, written independently of the compiler: parse the wire frame.
inline bool reference_match(const flow_rule& rule, const std::vector<std::uint8_t>& f) {
  const std::size_t n = f.size();
  std::size_t type_at = 12;
  std::optional<std::uint16_t> tci;
  if (n >= 18 && get16(&f[12]) == 0x8100) {
    tci = get16(&f[14]);
    type_at = 16;
  }
  if (rule.vlan_id && !(tci && (*tci & 0x0fff) == *rule.vlan_id))
    return false;
  auto mac_at = [&](std::size_t at, const mac_address& mac) {
    return n >= at + 6 && std::equal(mac.bytes.begin(), mac.bytes.end(), f.begin() + at);
  };
  if (rule.destination_mac && !mac_at(0, *rule.destination_mac))
    return false;
  if (rule.source_mac && !mac_at(6, *rule.source_mac))
    return false;
  if (rule.ethertype && !(n >= type_at + 2 && get16(&f[type_at]) == *rule.ethertype))
    return false;
  const std::size_t ip = type_at + 2;
  auto u32 = [&](std::size_t at) { return std::uint32_t{get16(&f[at])} << 16 | get16(&f[at + 2]); };
  if (rule.ipv4_source && !(n >= ip + 16 && u32(ip + 12) == rule.ipv4_source->to_uint()))
    return false;
  if (rule.ipv4_destination && !(n >= ip + 20 && u32(ip + 16) == rule.ipv4_destination->to_uint()))
    return false;
  if (rule.protocol && !(n >= ip + 10 && f[ip + 9] == static_cast<std::uint8_t>(*rule.protocol)))
    return false;
  if (rule.source_port || rule.destination_port) {
    if (n < ip + 8 || (get16(&f[ip + 6]) & 0x1fff) != 0)
      return false; // no transport header in later fragments
    const std::size_t l4 = ip + 4u * (f[ip] & 0x0f);
    if (n < l4 + 4)
      return false;
    if (rule.source_port && get16(&f[l4]) != *rule.source_port)
      return false;
    if (rule.destination_port && get16(&f[l4 + 2]) != *rule.destination_port)
      return false;
  }
  return true;
}

inline bool reference_match(const std::vector<flow_rule>& rules,
                            const std::vector<std::uint8_t>& f) {
  for (const auto& r : rules)
    if (reference_match(r, f))
      return true;
  return false;
}

// What an AF_PACKET socket sees: the outer 802.1Q tag moved to metadata.
inline kernel_frame kernel_view(const std::vector<std::uint8_t>& wire) {
  kernel_frame k;
  if (wire.size() >= 18 && get16(&wire[12]) == 0x8100) {
    k.vlan_tci = get16(&wire[14]);
    k.data = wire;
    k.data.erase(k.data.begin() + 12, k.data.begin() + 16);
  } else {
    k.data = wire;
  }
  return k;
}

} // namespace raw_test
