// What the raw socket needs to know about a network interface.
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <string>
#include <string_view>

namespace asio_rdma::detail {

struct interface_info {
  std::string name;
  unsigned index = 0;
  mac_address mac;
  unsigned mtu = 0;
};

/// Looks `name` up in the calling thread's network namespace. ENODEV when there is no such
/// interface, EOPNOTSUPP when it is not Ethernet.
interface_info lookup_interface(std::string_view name, error_code& ec);

} // namespace asio_rdma::detail
