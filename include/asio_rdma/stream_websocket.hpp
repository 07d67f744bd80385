// asio-rdma: what Boost.Beast's WebSocket stream needs of asio_rdma::stream, the layer
// under it: websocket::stream<asio_rdma::stream> (or <asio_rdma::stream&>) works once
// this header is included.
#pragma once

#include <asio_rdma/stream.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/role.hpp>

#include <utility>

namespace asio_rdma {

/// Beast's WebSocket teardown (found by argument-dependent lookup) once the closing
/// handshake is over: the stream closes at once (the close frames have been exchanged and
/// acknowledged, so nothing is lost) and the handler completes with success, posted. The
/// operation does not refer to the stream after this call, which may therefore go before
/// the handler runs.
template <typename TeardownHandler>
void async_teardown(boost::beast::role_type, stream& s, TeardownHandler&& handler) {
  s.close();
  boost::asio::post(s.get_executor(),
                    boost::asio::append(std::forward<TeardownHandler>(handler), error_code()));
}

/// The synchronous teardown Beast's synchronous close calls: the stream closes.
inline void teardown(boost::beast::role_type, stream& s, error_code& ec) {
  s.close();
  ec = {};
}

} // namespace asio_rdma
