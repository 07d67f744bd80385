// raw_ping's two modes, as coroutines on an open raw socket. Each returns the exit status.
#pragma once

#include "options.hpp"

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/awaitable.hpp>

namespace raw_ping {

/// Answers ARP requests for opts.ip and ICMP echo requests to it, forever or for opts.count
/// replies.
boost::asio::awaitable<int> run_responder(asio_rdma::raw_socket& socket, const options& opts);

/// Resolves opts.to by ARP, then sends echo requests and prints round-trip times like ping.
/// `stop` becomes true on SIGINT: the summary is printed and the coroutine returns.
boost::asio::awaitable<int> run_requester(asio_rdma::raw_socket& socket, const options& opts,
                                          const bool& stop);

} // namespace raw_ping
