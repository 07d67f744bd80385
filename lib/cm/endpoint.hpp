// sockaddr <-> asio endpoint conversion for rdma_cm addresses.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <sys/socket.h>

namespace asio_rdma::detail {

/// The endpoint in an rdma_cm address: IPv4 and IPv6 addresses convert, a null
/// pointer or any other family gives a default-constructed endpoint.
boost::asio::ip::tcp::endpoint to_endpoint(const sockaddr* address);

/// Writes `endpoint` into `out` (zero-filled first) for rdma_cm.
void to_sockaddr(const boost::asio::ip::tcp::endpoint& endpoint, sockaddr_storage& out);

} // namespace asio_rdma::detail
