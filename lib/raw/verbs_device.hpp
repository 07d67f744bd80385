// Finding the RDMA device and port that own a network interface.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

namespace asio_rdma::detail {

/// The ibv device whose port is bound to netdev `interface_name` (RoCE: the port's GID
/// table lists it; NICs: the device's net/ directory holds it), or null.
ibv_device* find_verbs_device(ibv_device** devices, const std::string& interface_name,
                              std::uint8_t& port);

} // namespace asio_rdma::detail
