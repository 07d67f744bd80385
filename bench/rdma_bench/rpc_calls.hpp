// rdma_bench --op rpc: asio_rdma::rpc calls over RDMA, an echo of `size` bytes, to compare
// with the send ping-pong, gRPC and UCX active messages (bench/compare_rpc).
//
// The client connects to the framework server with its test parameters (operation rpc)
// in the private data, as every connection test does; the server accepts, makes the
// connection a stream and serves it with an rpc::server whose one method, "echo", returns
// its request. The client makes an rpc::client over its stream and calls "echo":
//   bandwidth: `depth` calls in flight (each coroutine calls again as its call returns):
//     calls/s and Gb/s of requests, and each call's round trip (p50, p99);
//   latency: one call at a time: the round trip, halved as the ping-pongs report theirs
//     (min/median/p99 of one way), so that it compares with the send ping-pong directly.
// Every reply is checked to be the request's size.
#pragma once

#include "options.hpp"
#include "wire.hpp"

#include <asio_rdma/connection_request.hpp>

#include <boost/asio/awaitable.hpp>

namespace rdma_bench::rpc_calls {

/// Serves one rpc test the framework server has decoded.
boost::asio::awaitable<void> serve(asio_rdma::connection_request request, test_parameters t);

/// Runs the client's rpc tests (every size); returns the exit status.
boost::asio::awaitable<int> run_client(const settings& s);

} // namespace rdma_bench::rpc_calls
