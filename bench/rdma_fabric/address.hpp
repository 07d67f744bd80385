// rdma_fabric: where this rank listens. Without --address, the IPv4 address
// of the first RoCE GID (::ffff:a.b.c.d) of an active port: the address
// rdma_cm reaches that device by; failing that (iWARP, whose GIDs hold no
// IPv4 address), the first of this host's IPv4 addresses that rdma_cm reaches
// an active port by.
#pragma once

#include <string>

namespace rdma_fabric {

struct local_address {
  std::string address;
  std::string device; ///< The device that has the address ("?" when none is known).
};

/// `address` if given (with the device that has it), else the first IPv4
/// RoCE address of `device` (or of any device when empty), else the first
/// IPv4 address of this host that reaches it (iWARP). Throws
/// std::runtime_error saying what is missing.
local_address choose_address(const std::string& address, const std::string& device);

} // namespace rdma_fabric
