#include "address.hpp"

#include <asio_rdma/device_info.hpp>

#include <stdexcept>

namespace rdma_fabric {

namespace {

std::string ipv4_of(const asio_rdma::gid_entry& gid) {
  const std::string text = gid.to_string();
  const std::string prefix = "::ffff:";
  if (text.rfind(prefix, 0) == 0 && text.find('.') != std::string::npos)
    return text.substr(prefix.size());
  return {};
}

} // namespace

local_address choose_address(const std::string& address, const std::string& device) {
  asio_rdma::error_code ec;
  const auto devices = asio_rdma::list_devices(ec);
  if (!address.empty()) {
    for (const auto& d : devices)
      for (const auto& p : d.ports)
        for (const auto& g : p.gids)
          if (ipv4_of(g) == address && (device.empty() || device == d.name))
            return {address, d.name};
    return {address, device.empty() ? "?" : device};
  }
  if (ec)
    throw std::runtime_error("cannot list the RDMA devices: " + ec.message());
  for (const auto& d : devices) {
    if (!device.empty() && d.name != device)
      continue;
    for (const auto& p : d.ports) {
      if (p.state != asio_rdma::port_state::active)
        continue;
      for (const auto& g : p.gids)
        if (auto ip = ipv4_of(g); !ip.empty())
          return {ip, d.name};
    }
  }
  throw std::runtime_error(device.empty()
                               ? "no RDMA device with an active port and an IPv4 address "
                                 "(give --address)"
                               : "device " + device +
                                     " has no active port with an IPv4 address (give --address)");
}

} // namespace rdma_fabric
