// asio-rdma: listening for and accepting connections (the passive side).
#pragma once

#include <asio_rdma/connection.hpp>
#include <asio_rdma/connection_request.hpp>
#include <asio_rdma/detail/pending_operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace asio_rdma {

class stream;
struct stream_options;

namespace detail {
class acceptor_impl;
using request_operation = pending_operation<void(error_code, connection_request)>;
// The acceptor's entries into lib/ (see detail/pending_operation.hpp).
void start_accept_request(acceptor_impl* impl, request_operation&& pending);
void start_accept(acceptor_impl* impl, connection_operation&& pending);

/// acceptor::async_accept: completes with bad_descriptor (posted) on an acceptor that
/// does not listen.
class initiate_async_accept : public io_initiation<acceptor_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, connection());
    start_accept(impl_, pending<void(error_code, connection)>(std::forward<Handler>(handler)));
  }
};

/// acceptor::async_accept_request, likewise.
class initiate_async_accept_request : public io_initiation<acceptor_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, connection_request());
    start_accept_request(
        impl_, pending<void(error_code, connection_request)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// Options of a listener.
struct acceptor_options {
  /// Connection requests the CM queues before they are taken with
  /// async_accept / async_accept_request; later ones are refused by the CM.
  int backlog = 128;
  /// Options of the connections async_accept() establishes (its private data
  /// goes with the accept reply).
  connection_options connection;
};

/// Listens on an address and port for RDMA connections (rdma_cm, RC).
///
/// The listener's event channel is waited on by the io_context of the
/// executor; no thread is involved. Move-only; destroying it stops listening,
/// rejects requests not yet taken and completes pending accepts with
/// asio::error::operation_aborted. Connections already accepted live on.
class acceptor {
public:
  /// The type of the executor that runs handlers by default.
  using executor_type = boost::asio::any_io_executor;

  /// An acceptor that does not listen yet.
  explicit acceptor(const executor_type& ex);
  /// Listens on `address`:`port` (see listen()); throws boost::system::system_error.
  acceptor(const executor_type& ex, const std::string& address, std::uint16_t port,
           const acceptor_options& options = {});
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  acceptor(acceptor&&) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  acceptor& operator=(acceptor&&) noexcept;
  ~acceptor();

  /// The executor that runs handlers by default.
  executor_type get_executor() const { return ex_; }

  /// Binds to `address` ("0.0.0.0" or "::" for all RDMA devices) and `port`
  /// (0 picks a free port; see local_endpoint()) and starts listening.
  void listen(const std::string& address, std::uint16_t port,
              const acceptor_options& options = {});
  /// As the overload above, reporting failure through `ec` instead of throwing
  /// (asio::error::bad_descriptor on an acceptor moved from).
  void listen(const std::string& address, std::uint16_t port, const acceptor_options& options,
              error_code& ec);

  /// True while listening.
  bool is_open() const noexcept;
  /// The address and port listened on.
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  /// Waits for the next connection request and accepts it with
  /// acceptor_options::connection.
  ///
  /// Completion signature: void(error_code, connection). The connection is
  /// established (the peer's RTU seen) when the handler runs. Errors:
  /// asio::error::operation_aborted (closed or cancelled),
  /// asio::error::timed_out (the handshake did not finish within the
  /// connection timeout), asio::error::connection_aborted (the requester gave
  /// up while its request was being accepted), errors of the device. A request
  /// whose requester gave up while it was queued is dropped, not handed over
  /// (RoCE and InfiniBand; on iWARP the requester's queue pair still waits for
  /// the answer, and the connection it gets ends). Cancellation (any type)
  /// withdraws the wait; a request already being accepted is abandoned.
  ///
  /// On iWARP the accepted end must not send before the connecting end's first
  /// message has arrived (MPA; docs/devices.md): let the connecting side speak first.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_accept(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, connection)>(
        detail::initiate_async_accept(impl_.get(), ex_), token);
  }

  /// Accepts the next connection (as async_accept) and makes it a byte stream with
  /// `stream_opts` (give the acceptor stream_connection_options() for small connection
  /// buffers; the peer connects with async_connect_stream). Declared here, defined in
  /// <asio_rdma/stream.hpp>, which a caller includes for the stream type anyway.
  ///
  /// Completion signature: void(error_code, stream). Errors and cancellation: those of
  /// async_accept, and the stream constructor's (errc::invalid_option, a registration
  /// failure). The acceptor must outlive the operation.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_accept_stream(const stream_options& stream_opts, CompletionToken&& token = {});

  /// As above with the default stream_options.
  template <typename CompletionToken = boost::asio::deferred_t>
    requires(!std::is_same_v<std::decay_t<CompletionToken>, stream_options>)
  auto async_accept_stream(CompletionToken&& token = {});

  /// Waits for the next connection request and hands it over undecided: the
  /// caller reads its private data and peer address, then accepts (with its
  /// own private data and options) or rejects it.
  ///
  /// Completion signature: void(error_code, connection_request).
  /// Cancellation (any type) withdraws the wait; no request is lost.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_accept_request(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, connection_request)>(
        detail::initiate_async_accept_request(impl_.get(), ex_), token);
  }

  /// Stops listening (see the class description).
  void close() noexcept;

private:
  executor_type ex_;
  std::shared_ptr<detail::acceptor_impl> impl_;
};

} // namespace asio_rdma
