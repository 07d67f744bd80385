// rdma_bench on the asio_rdma library: the server and the client, written on
// the library's public API only (that is what they measure).
#pragma once

#include "options.hpp"
#include "results.hpp"

#include <asio_rdma/acceptor.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>

#include <utility>

namespace rdma_bench::framework {

/// Accepts clients until stopped; each connection runs the test its private
/// data asks for. Throws on a listening failure.
boost::asio::awaitable<void> serve(const settings& s);

/// Serves the clients `acceptor` accepts until its accept is cancelled (the
/// acceptor must outlive the coroutine).
boost::asio::awaitable<void> serve(asio_rdma::acceptor& acceptor);

/// Runs the client's tests (one connection set per size); returns the exit
/// status. Throws on connection or operation failure.
boost::asio::awaitable<int> run_client(const settings& s);

/// Connects to s.host:s.port, measures one size of the test, disconnects
/// (a connection that failed is closed, not disconnected); `device` gets the
/// local device's name. Throws on connection or operation failure.
boost::asio::awaitable<result> measure(const settings& s, std::size_t size, std::string& device);

/// --op send's send of `slice` (registered memory): zero-copy from it, or, with
/// `copied` (--send-from copied), from the same bytes passed as plain memory, which the
/// library copies (inline into the work request, or into its own registered slot), as a
/// service's `async_send(asio::buffer(...))` goes.
template <typename CompletionToken>
auto async_send_from(asio_rdma::connection& conn, const asio_rdma::local_buffer& slice,
                     bool copied, CompletionToken token) {
  if (copied)
    return conn.async_send(boost::asio::buffer(slice.data, slice.length), std::move(token));
  return conn.async_send(slice, std::move(token));
}

} // namespace rdma_bench::framework
