// rdma_bench --op stream: asio_rdma::stream (a byte stream over RDMA), bandwidth and
// ping-pong latency, to compare with rdma-core's rstream (rsocket) and with TCP
// (bench/compare_stream).
//
// The client connects to the framework server with its test parameters (operation
// stream) in the private data, as every connection test does; the server accepts, makes
// the connection a stream and
//   bandwidth: reads until the client's end of data (async_shutdown), then writes back
//     the count of bytes it read (8 bytes, little-endian), which the client checks
//     against what it wrote: nothing lost, nothing counted twice;
//   latency: reads `size` bytes and writes them back, until the client's end of data.
// The client's bandwidth is asio::async_write of one `size` buffer after another (a
// write completes once its bytes are in the stream's send buffer, so the steady rate is
// the rate at which the server's reads make room); its latency is half the round trip
// of async_write + async_read, as rstream reports its usec/xfer.
#pragma once

#include "options.hpp"
#include "wire.hpp"

#include <asio_rdma/connection_request.hpp>

#include <boost/asio/awaitable.hpp>

namespace rdma_bench::streams {

/// Serves one stream test the framework server has decoded.
boost::asio::awaitable<void> serve(asio_rdma::connection_request request, test_parameters t);

/// Runs the client's stream tests (every size); returns the exit status.
boost::asio::awaitable<int> run_client(const settings& s);

} // namespace rdma_bench::streams
