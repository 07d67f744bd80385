// asio-rdma: what Boost.Beast's WebSocket stream needs of asio_rdma::stream, the layer
// under it: websocket::stream<asio_rdma::stream> (or <asio_rdma::stream&>) works once
// this header is included.
#pragma once

#include <asio_rdma/stream.hpp>

#include <boost/beast/core/role.hpp>

#include <utility>

namespace asio_rdma {

/// Beast's WebSocket teardown (found by argument-dependent lookup) once the closing
/// handshake is over, as for a TCP socket: this side's data ends (async_shutdown), then
/// the stream closes. Completes with success: the closing handshake is what said the
/// connection is over, and the peer may well have closed its end first.
template <typename TeardownHandler>
void async_teardown(boost::beast::role_type, stream& s, TeardownHandler&& handler) {
  s.async_shutdown([&s, h = std::forward<TeardownHandler>(handler)](error_code) mutable {
    s.close();
    std::move(h)(error_code());
  });
}

/// The synchronous teardown Beast's synchronous close calls: the stream closes.
inline void teardown(boost::beast::role_type, stream& s, error_code& ec) {
  s.close();
  ec = {};
}

} // namespace asio_rdma
