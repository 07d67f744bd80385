// asio-rdma: establishing a connection as the active side.
#pragma once

#include <asio_rdma/connection.hpp>

#include <cstdint>
#include <string>

namespace asio_rdma {

namespace detail {
// async_connect's entry into lib/ (see detail/pending_operation.hpp).
void start_connect(const boost::asio::any_io_executor& ex, std::string host, std::uint16_t port,
                   const connection_options& options, connection_operation&& pending);

/// async_connect. No I/O object yet; the executor the connection will run on is held by
/// value: it is the caller's argument, which a deferred operation outlives.
class initiate_async_connect : public io_initiation<no_object, executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::string host, std::uint16_t port,
                  const connection_options& options) const {
    start_connect(io(), std::move(host), port, options,
                  pending<void(error_code, connection)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// Connects to an RDMA listener (an asio_rdma::acceptor, or any rdma_cm
/// server on the RC port space) at `host`:`port`.
///
/// `host` is a numeric IPv4/IPv6 address or a name (resolved with Asio's
/// resolver). The connection runs on `ex`. Resolution, route lookup and the
/// handshake together are bounded by `options.timeout`; the private data in
/// `options` travels with the connect request.
///
/// Completion signature: void(error_code, connection). Distinct errors:
/// asio::error::host_not_found (no such host); errc::address_resolution_failed
/// (no RDMA device reaches that address); errc::route_resolution_failed;
/// asio::error::connection_refused (nobody listens on that port);
/// errc::rejected (the peer rejected: the returned, not open, connection's
/// peer_private_data() holds its reason); errc::unreachable;
/// errc::connection_error; asio::error::timed_out; errc::invalid_option.
///
/// Cancellation (any type) abandons the attempt with
/// asio::error::operation_aborted. A cancelled or timed-out attempt completes at
/// once on every device; on iWARP its queue pair is destroyed only when the peer
/// answers (at most its handshake timeout; see docs/devices.md), without
/// blocking the io_context. The handler runs on its associated
/// executor (default: `ex`).
template <typename CompletionToken = boost::asio::deferred_t>
auto async_connect(const boost::asio::any_io_executor& ex, std::string host, std::uint16_t port,
                   const connection_options& options = {}, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, connection)>(
      detail::initiate_async_connect(ex), token, std::move(host), port, options);
}

} // namespace asio_rdma
