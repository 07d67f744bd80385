// rdma_bench on the asio_rdma library: the server and the client, written on
// the library's public API only (that is what they measure).
#pragma once

#include "options.hpp"

#include <boost/asio/awaitable.hpp>

namespace rdma_bench::framework {

/// Accepts clients until stopped; each connection runs the test its private
/// data asks for. Throws on a listening failure.
boost::asio::awaitable<void> serve(const settings& s);

/// Runs the client's tests (one connection set per size); returns the exit
/// status. Throws on connection or operation failure.
boost::asio::awaitable<int> run_client(const settings& s);

} // namespace rdma_bench::framework
