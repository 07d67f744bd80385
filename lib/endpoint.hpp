// sockaddr <-> asio endpoint conversion for rdma_cm addresses.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <sys/socket.h>

namespace asio_rdma::detail {

boost::asio::ip::tcp::endpoint to_endpoint(const sockaddr* address);

} // namespace asio_rdma::detail
