// asio-rdma RPC: the client, a channel to one service endpoint.
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/rpc/error.hpp>
#include <asio_rdma/rpc/method_id.hpp>
#include <asio_rdma/rpc/options.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace asio_rdma::rpc {

namespace detail {
class client_impl;

/// Starts client_impl::call (lib/rpc/client.cpp).
void start_call(client_impl* impl, std::uint32_t method, boost::asio::const_buffer request,
                const call_options& options,
                asio_rdma::detail::pending_operation<void(boost::system::error_code,
                                                          std::vector<std::byte>)>&& op);

/// As above, the reply read into the caller's `reply`.
void start_call(client_impl* impl, std::uint32_t method, boost::asio::const_buffer request,
                boost::asio::mutable_buffer reply, const call_options& options,
                asio_rdma::detail::pending_operation<void(boost::system::error_code,
                                                          std::size_t)>&& op);

/// Starts client_impl::connect (lib/rpc/client.cpp).
void start_connect(client_impl* impl,
                   asio_rdma::detail::pending_operation<void(boost::system::error_code)>&& op);

/// rpc::client::async_connect.
class initiate_connect : public asio_rdma::detail::io_initiation<client_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor);
    start_connect(impl_,
                  pending<void(boost::system::error_code)>(std::forward<Handler>(handler)));
  }
};

/// rpc::client::async_call.
class initiate_call : public asio_rdma::detail::io_initiation<client_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::uint32_t method, boost::asio::const_buffer request,
                  const call_options& options) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor,
                    std::vector<std::byte>());
    start_call(impl_, method, request, options,
               pending<void(boost::system::error_code, std::vector<std::byte>)>(
                   std::forward<Handler>(handler)));
  }
  template <typename Handler>
  void operator()(Handler&& handler, std::uint32_t method, boost::asio::const_buffer request,
                  boost::asio::mutable_buffer reply, const call_options& options) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor,
                    std::size_t(0));
    start_call(impl_, method, request, reply, options,
               pending<void(boost::system::error_code, std::size_t)>(
                   std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// A client of one service endpoint: calls many at once on one connection, each with a
/// deadline, cancellable, answered in any order.
///
/// The connection is made by the first call (lazily) or by async_connect, over RDMA (an
/// asio_rdma::stream) or TCP as the endpoint says, with keepalive on. When it fails, every
/// call in flight fails at once with the transport's error (connection_reset, a work
/// completion's status, timed_out if it could not be established within connect_timeout);
/// during the reconnect backoff that follows (client_options) calls fail at once with
/// errc::unavailable; the first call after it connects again. No call is retried behind
/// the caller's back: only a call marked idempotent (call_options::idempotent) is sent
/// again after a failure that says nothing of the server's answer, as
/// client_options::retry says, within its deadline.
///
/// Thread safety: as an Asio socket: one object, one thread (or strand) at a time. The
/// handlers of calls run on their associated executor (default: the client's).
/// Move-only; destroying or closing the client fails its pending calls with
/// asio::error::operation_aborted.
class client {
public:
  using executor_type = boost::asio::any_io_executor;

  /// A client of `url` ("rdma://host:port" or "tcp://host:port"). Connects at the first
  /// call. Throws boost::system::system_error: errc::bad_endpoint for a malformed url,
  /// asio_rdma::errc::invalid_option for invalid options.
  client(const executor_type& ex, std::string_view url, const client_options& options);
  /// As above with the default options. (An overload, not a default argument: GCC 12
  /// destroys a default argument twice in a call that has a co_await among its arguments,
  /// as `client c(co_await asio::this_coro::executor, url)` has.)
  client(const executor_type& ex, std::string_view url);
  /// A client over an established stream (made by the program: over a connection it
  /// accepted or connected out of band) or TCP socket: the hello is exchanged at once, calls
  /// made meanwhile wait. Its executor is the stream's. It is never reconnected: once the
  /// connection fails, calls fail with errc::unavailable. Throws as above for invalid
  /// options.
  client(asio_rdma::stream established, const client_options& options);
  client(boost::asio::ip::tcp::socket established, const client_options& options);
  /// As above with the default options.
  explicit client(asio_rdma::stream established);
  explicit client(boost::asio::ip::tcp::socket established);
  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  ~client();

  executor_type get_executor() const noexcept { return ex_; }

  /// Calls `method` with the bytes of `request`; the reply is the server's bytes.
  ///
  /// Completion signature: void(error_code, std::vector<std::byte>). On success the bytes
  /// are the method's response. On an error the server reports (errc: unknown_method,
  /// server_draining, handler_failed, cancelled, ...), they are the server's message
  /// (rpc::message_of). Other errors: errc::request_too_large (nothing sent),
  /// errc::deadline_exceeded, errc::response_too_large, errc::unavailable, the
  /// transport's error when the connection fails, and asio::error::operation_aborted when
  /// the call is cancelled or the client closed.
  ///
  /// `request` must stay valid until the handler runs (the call never completes while
  /// its request is being written). Deadline: options.deadline, or the client's default;
  /// it bounds every attempt of a call that options.idempotent lets the client retry.
  /// Cancellation (any type, through the handler's slot): the call completes with
  /// operation_aborted at once, or once its request is written if that is under way; a
  /// server that has the request is told, and its handler is cancelled. A reply that
  /// races the cancellation either wins (the call succeeds) or is dropped: exactly one
  /// outcome.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_call(std::string_view method, boost::asio::const_buffer request,
                  const call_options& options, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::vector<std::byte>)>(
        detail::initiate_call(impl_.get(), ex_), token, method_id(method), request,
        options);
  }

  /// As above with the default deadline.
  template <typename CompletionToken = boost::asio::deferred_t>
    requires(!std::is_convertible_v<CompletionToken, const call_options&> &&
             !std::is_convertible_v<CompletionToken, boost::asio::mutable_buffer>)
  auto async_call(std::string_view method, boost::asio::const_buffer request,
                  CompletionToken&& token = {}) {
    return async_call(method, request, call_options{}, std::forward<CompletionToken>(token));
  }

  /// Calls `method` as above, with the reply read into the caller's `reply` instead of a
  /// new vector: a steady stream of these calls makes no heap allocation on the client.
  ///
  /// Completion signature: void(error_code, std::size_t): on success, the reply's length
  /// (its bytes are at the start of `reply`). A reply longer than `reply` fails the call
  /// with errc::response_too_large (its bytes are read and dropped). On an error the server
  /// reports, its message is copied into `reply` as far as it fits and the size is that
  /// of the copy. Errors, deadline, cancellation and retries otherwise as above. `reply`
  /// must stay valid until the handler runs: the library never writes to it afterwards
  /// (a reply that comes for a call already ended is dropped).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_call(std::string_view method, boost::asio::const_buffer request,
                  boost::asio::mutable_buffer reply, const call_options& options,
                  CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        detail::initiate_call(impl_.get(), ex_), token, method_id(method), request, reply,
        options);
  }

  /// As above with the default deadline.
  template <typename CompletionToken = boost::asio::deferred_t>
    requires(!std::is_convertible_v<CompletionToken, const call_options&>)
  auto async_call(std::string_view method, boost::asio::const_buffer request,
                  boost::asio::mutable_buffer reply, CompletionToken&& token = {}) {
    return async_call(method, request, reply, call_options{},
                      std::forward<CompletionToken>(token));
  }

  /// Connects now instead of at the first call: completes once the connection is up and
  /// the hellos are exchanged, so that register_memory() can serve the first call and the
  /// connect's cost is not paid by it. Calls may be made meanwhile; they wait as they
  /// would for a lazy connect.
  ///
  /// Completion signature: void(error_code). Succeeds at once (posted) while connected.
  /// Errors: the connection's own (connection_refused, the transport's error, timed_out
  /// when client_options::connect_timeout passes), errc::unavailable during the reconnect
  /// backoff after a failure (the backoff is not cut short) and for a client over an
  /// established stream or socket whose connection has failed, asio::error::bad_descriptor
  /// for a closed client, operation_aborted when cancelled or when the client is closed
  /// meanwhile. Cancellation (any type, through the handler's slot): this wait ends with
  /// operation_aborted; the connection attempt goes on for the calls that wait on it.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_connect(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::initiate_connect(impl_.get(), ex_), token);
  }

  /// Fails the pending calls with operation_aborted and closes the connection; later
  /// calls fail with asio::error::bad_descriptor.
  void close() noexcept;

  /// True while a connection is established.
  bool is_connected() const noexcept;

  /// Registers `bytes` with the device of the client's connection, for calls to advertise
  /// as their bulk request (call_options::request_memory; `flags` access::remote_read) or
  /// reply buffer (call_options::reply_memory; access::local_write |
  /// access::remote_write) without registering them per call, as Mercury's bulk handles
  /// are made once and reused. The region serves every connection on that device, so
  /// after a reconnection through the same device it still does. Registration is a system
  /// call that pins `bytes`: register large, long-lived buffers once.
  ///
  /// Errors: asio::error::not_connected until the client's connection is up (it connects
  /// at the first call, or at async_connect); errc::operation_not_supported over TCP; bad_descriptor once the
  /// client is closed; the registration's own error.
  memory_region register_memory(std::span<std::byte> bytes, access flags,
                                boost::system::error_code& ec) const;
  /// As above, throwing boost::system::system_error.
  memory_region register_memory(std::span<std::byte> bytes, access flags) const;

private:
  std::unique_ptr<detail::client_impl> impl_;
  executor_type ex_;
};

} // namespace asio_rdma::rpc
