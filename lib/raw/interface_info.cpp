#include "raw/interface_info.hpp"

#include "verbs/verbs_error.hpp"

#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace asio_rdma::detail {

interface_info lookup_interface(std::string_view name, error_code& ec) {
  interface_info info;
  ec = {};
  if (name.empty() || name.size() >= IFNAMSIZ) {
    ec = error_code(ENODEV, boost::system::system_category());
    return info;
  }
  info.name = std::string(name);
  info.index = if_nametoindex(info.name.c_str());
  if (info.index == 0) {
    ec = from_errno();
    return info;
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ec = from_errno();
    return info;
  }
  ifreq request{};
  std::memcpy(request.ifr_name, info.name.data(), info.name.size());
  if (::ioctl(fd, SIOCGIFHWADDR, &request) != 0) {
    ec = from_errno();
  } else if (request.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
    ec = error_code(EOPNOTSUPP, boost::system::system_category());
  } else {
    std::memcpy(info.mac.bytes.data(), request.ifr_hwaddr.sa_data, 6);
    if (::ioctl(fd, SIOCGIFMTU, &request) != 0)
      ec = from_errno();
    else
      info.mtu = static_cast<unsigned>(request.ifr_mtu);
  }
  ::close(fd);
  return info;
}

} // namespace asio_rdma::detail
