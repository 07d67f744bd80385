#include "endpoint.hpp"

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

} // namespace asio_rdma::detail
