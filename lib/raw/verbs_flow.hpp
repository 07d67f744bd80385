// Flow rules -> ibv_create_flow attributes, for the verbs backend. A pure function, tested
// byte for byte in test/raw.
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace asio_rdma::detail {

/// An ibv_flow_attr followed by its specs in one suitably aligned block, as ibv_create_flow
/// reads it.
class verbs_flow_attr {
public:
  ibv_flow_attr* get() noexcept { return reinterpret_cast<ibv_flow_attr*>(storage_.data()); }
  const ibv_flow_attr* get() const noexcept {
    return reinterpret_cast<const ibv_flow_attr*>(storage_.data());
  }
  /// The whole block (attribute and specs) as bytes; its size equals get()->size.
  std::span<const std::byte> bytes() const noexcept {
    return {reinterpret_cast<const std::byte*>(storage_.data()), size_};
  }

private:
  friend verbs_flow_attr build_verbs_flow(const flow_rule&, std::uint8_t, std::uint16_t);
  std::vector<std::uint64_t> storage_;
  std::size_t size_ = 0;
};

/// Builds the flow attribute for a normalized rule: always an ETH spec (destination MAC,
/// source MAC, ethertype, VLAN tag with mask 0x0fff), then an IPV4 spec when the rule has an
/// IPv4 address or protocol, then a TCP or UDP spec when it has a protocol. Values and masks
/// are in network byte order; an absent field has value and mask 0. `port` is the device port
/// (1-based), `priority` the verbs flow priority.
verbs_flow_attr build_verbs_flow(const flow_rule& rule, std::uint8_t port,
                                 std::uint16_t priority = 0);

} // namespace asio_rdma::detail
