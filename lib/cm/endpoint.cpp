#include "cm/endpoint.hpp"

#include <cstring>
#include <netinet/in.h>

namespace asio_rdma::detail {

boost::asio::ip::tcp::endpoint to_endpoint(const sockaddr* address) {
  boost::asio::ip::tcp::endpoint ep;
  if (!address)
    return ep;
  if (address->sa_family == AF_INET)
    std::memcpy(ep.data(), address, sizeof(sockaddr_in));
  else if (address->sa_family == AF_INET6)
    std::memcpy(ep.data(), address, sizeof(sockaddr_in6));
  return ep;
}

void to_sockaddr(const boost::asio::ip::tcp::endpoint& endpoint, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  std::memcpy(&out, endpoint.data(), endpoint.size());
}

} // namespace asio_rdma::detail
