#include "address.hpp"

#include <asio_rdma/device_info.hpp>

#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <stdexcept>
#include <utility>
#include <vector>

namespace rdma_fabric {

namespace {

std::string ipv4_of(const asio_rdma::gid_entry& gid) {
  const std::string text = gid.to_string();
  const std::string prefix = "::ffff:";
  if (text.rfind(prefix, 0) == 0 && text.find('.') != std::string::npos)
    return text.substr(prefix.size());
  return {};
}

/// The device and port rdma_cm reaches `ipv4` by ("" if none): an id bound there finds
/// them. iWARP devices (siw, irdma, Chelsio) are reached this way only: their GIDs are
/// MAC addresses, with no IPv4 in them.
std::pair<std::string, int> device_at(const std::string& ipv4) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ipv4.c_str(), &address.sin_addr) != 1)
    return {};
  rdma_cm_id* id = nullptr;
  if (::rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) != 0)
    return {};
  std::pair<std::string, int> found;
  if (::rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&address)) == 0 && id->verbs)
    found = {::ibv_get_device_name(id->verbs->device), id->port_num};
  ::rdma_destroy_id(id);
  return found;
}

/// This host's IPv4 addresses on interfaces that are up, loopback left out.
std::vector<std::string> host_ipv4_addresses() {
  std::vector<std::string> found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    return found;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
        (i->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text))
      found.emplace_back(text);
  }
  ::freeifaddrs(list);
  return found;
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
    if (auto [name, port] = device_at(address); !name.empty() && (device.empty() || device == name))
      return {address, name};
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
  // No RoCE GID with an IPv4 address: an address of this host that rdma_cm reaches a
  // device's active port by (iWARP).
  for (const auto& ip : host_ipv4_addresses()) {
    auto [name, port] = device_at(ip);
    if (name.empty() || (!device.empty() && name != device))
      continue;
    for (const auto& d : devices)
      for (const auto& p : d.ports)
        if (d.name == name && p.number == port && p.state == asio_rdma::port_state::active)
          return {ip, name};
  }
  throw std::runtime_error(device.empty()
                               ? "no RDMA device with an active port and an IPv4 address "
                                 "(give --address)"
                               : "device " + device +
                                     " has no active port with an IPv4 address (give --address)");
}

} // namespace rdma_fabric
