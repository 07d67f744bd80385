// asio-rdma: a connection request received by an acceptor, not yet decided.
#pragma once

#include <asio_rdma/connection.hpp>

#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <span>

namespace asio_rdma {

namespace detail {
struct pending_request;
struct internal_access;
/// Out of line so that the handle works with pending_request incomplete.
struct pending_request_deleter {
  void operator()(pending_request* request) const noexcept;
};
using pending_request_ptr = std::unique_ptr<pending_request, pending_request_deleter>;
// connection_request::async_accept's entry into lib/ (see detail/pending_operation.hpp).
void start_accept_request_as_connection(pending_request_ptr request,
                                        const connection_options& options,
                                        connection_operation&& pending);

/// connection_request::async_accept: the request travels into the operation; one
/// already decided (or moved from) completes with not_connected, posted.
/// The executor is held by value: the request may be gone before a deferred operation
/// starts (it is decided when async_accept returns).
class initiate_async_accept_connection_request
    : public io_initiation<no_object, executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, pending_request_ptr request,
                  const connection_options& options) const {
    if (!request)
      return closed(std::move(handler), boost::asio::error::not_connected, connection());
    start_accept_request_as_connection(
        std::move(request), options,
        pending<void(error_code, connection)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// A peer's connection request, taken with acceptor::async_accept_request().
///
/// Decide it with async_accept() or reject(). Move-only; destroying an
/// undecided request rejects it (without private data).
class connection_request {
public:
  /// The type of the executor the accepted connection runs on.
  using executor_type = boost::asio::any_io_executor;

  connection_request() noexcept;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  connection_request(connection_request&&) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  connection_request& operator=(connection_request&&) noexcept;
  ~connection_request();

  /// The executor the accepted connection runs on (the acceptor's; empty when the
  /// request was default-constructed).
  executor_type get_executor() const noexcept { return ex_; }

  /// True while the request is undecided.
  bool is_pending() const noexcept { return request_ != nullptr; }

  /// The requester's address (rdma_cm's view of it).
  boost::asio::ip::tcp::endpoint remote_endpoint() const;
  /// The private data the requester sent (zero-padded to 56 bytes by the CM
  /// on InfiniBand and RoCE).
  std::span<const std::byte> private_data() const noexcept;

  /// Accepts: creates the queue pair with `options`, posts the receive
  /// buffers, replies with options.private_data (at most 196 bytes).
  ///
  /// Completion signature: void(error_code, connection), once the handshake
  /// finished (or asio::error::timed_out after options.timeout).
  /// Cancellation (any type) abandons the connection. The request is decided
  /// (is_pending() false) when this returns.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_accept(const connection_options& options = {}, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, connection)>(
        detail::initiate_async_accept_connection_request(ex_), token, std::move(request_),
        options);
  }

  /// Rejects the request, sending `private_data` (at most 148 bytes; more:
  /// asio::error::invalid_argument) with the rejection; the requester's
  /// async_connect fails with errc::rejected.
  void reject(std::span<const std::byte> private_data = {});
  /// As the overload above, reporting failure through `ec` instead of throwing.
  void reject(std::span<const std::byte> private_data, error_code& ec);

private:
  friend struct detail::internal_access; // lib/internal_access.hpp

  /// Takes over a request from the acceptor, whose executor is `ex`.
  connection_request(detail::pending_request_ptr request, executor_type ex) noexcept;

  detail::pending_request_ptr request_;
  executor_type ex_;
};

} // namespace asio_rdma
