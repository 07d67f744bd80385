// asio-rdma RPC: the server, its methods and a call's context.
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/rpc/error.hpp>
#include <asio_rdma/rpc/options.hpp>
#include <asio_rdma/stream.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace asio_rdma::rpc {

namespace detail {
class request_source;
void start_request_read(
    request_source* source, std::size_t offset, boost::asio::mutable_buffer into,
    const memory_region* holding,
    asio_rdma::detail::pending_operation<void(boost::system::error_code, std::size_t)>&& op);
std::size_t request_size(const request_source* source) noexcept;

class reply_sink;
void start_reply_write(
    reply_sink* sink, std::size_t offset, boost::asio::const_buffer bytes,
    const memory_region* holding,
    asio_rdma::detail::pending_operation<void(boost::system::error_code, std::size_t)>&& op);
std::size_t reply_room(const reply_sink* sink) noexcept;

class initiate_reply_write
    : public asio_rdma::detail::io_initiation<reply_sink*,
                                              asio_rdma::detail::executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::size_t offset, boost::asio::const_buffer bytes,
                  const memory_region* holding = nullptr) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor,
                    std::size_t(0));
    start_reply_write(
        impl_, offset, bytes, holding,
        pending<void(boost::system::error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

class initiate_request_read
    : public asio_rdma::detail::io_initiation<request_source*,
                                              asio_rdma::detail::executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::size_t offset, boost::asio::mutable_buffer into,
                  const memory_region* holding = nullptr) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor,
                    std::size_t(0));
    start_request_read(
        impl_, offset, into, holding,
        pending<void(boost::system::error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// A call's request as a bulk handle: its bytes read piecewise, from any offset, into
/// memory of the handler's (Mercury's HG_Bulk_transfer pull, Thallium's bulk). Over RDMA, a
/// bulk request (client_options::bulk_threshold) to a method added with
/// method_options::reads_request_piecewise stays in the client's memory, and each read is
/// an RDMA read of the part asked for, straight into `into`: a handler can take a request
/// larger than it wants to hold (store an upload as it comes). Any other request is in the
/// server's memory already, and a read copies from it: the same handler code runs over TCP.
///
/// Valid while the handler runs; reads may overlap.
class bulk_request {
public:
  using executor_type = boost::asio::any_io_executor;

  /// The request's length in bytes.
  std::size_t size() const noexcept { return detail::request_size(source_); }

  /// Reads the request's bytes from `offset` into `into`: min(into.size(), size() -
  /// offset) of them. Completion signature: void(error_code, std::size_t bytes_read).
  /// Errors: asio::error::eof for an offset at or past the end (0 bytes); the
  /// connection's transport error if the read failed (the client's connection is then
  /// lost). Not cancellable: a read of the client's memory completes (or fails) on its
  /// own, soon. Over RDMA it registers `into` for the read (a system call); read pieces of
  /// hundreds of KiB or more.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_read(std::size_t offset, boost::asio::mutable_buffer into,
                  CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        detail::initiate_request_read(source_, ex_), token, offset, into);
  }
  /// As above, into memory the handler registered once (call_context::register_memory,
  /// with access::local_write | access::remote_write) that holds `into`: over RDMA
  /// nothing is registered for the read. A region on another device is not used (`into`
  /// is registered as above); `into` outside the region fails with errc::out_of_bounds,
  /// a region without that access with asio::error::invalid_argument, both completed
  /// without reading. Completion signature, errors otherwise and cancellation as above;
  /// `into_memory` must stay registered until the read completes (the device writes into
  /// it until then).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_read(std::size_t offset, boost::asio::mutable_buffer into,
                  const memory_region& into_memory, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        detail::initiate_request_read(source_, ex_), token, offset, into, &into_memory);
  }

  /// \cond INTERNAL
  bulk_request(detail::request_source* source, const executor_type& ex) noexcept
      : source_(source), ex_(ex) {}
  /// \endcond

private:
  detail::request_source* source_;
  executor_type ex_;
};

/// A call's reply as a bulk handle: written piecewise, at any offsets, from memory of the
/// handler's (Mercury's HG_Bulk_transfer push). When the caller gave a buffer with
/// call_options::expose_reply_buffer (over RDMA), each write is an RDMA write straight
/// into the caller's buffer: a handler can produce a reply larger than it wants to hold
/// (send a file as it reads it). Otherwise the writes collect in the server's memory and
/// the reply travels as any other: the same handler code runs over TCP.
///
/// A handler that writes through it returns an empty vector: the reply is what it wrote,
/// up to the end of its furthest write (bytes it skipped are zero, or whatever the
/// caller's buffer held). Valid while the handler runs; writes may overlap in time.
class bulk_reply {
public:
  using executor_type = boost::asio::any_io_executor;

  /// The most bytes the reply may have: the caller's buffer, or the largest reply the
  /// client takes (client_options::max_response_size).
  std::size_t size() const noexcept { return detail::reply_room(sink_); }

  /// Writes `bytes` at `offset` of the reply. Completion signature: void(error_code,
  /// std::size_t bytes_written), all of them or none. Errors: errc::response_too_large
  /// past size(); the connection's transport error if the write failed (the client's
  /// connection is then lost). Not cancellable: a write completes (or fails) on its own,
  /// soon. Over RDMA it registers `bytes` for the write (a system call): write pieces of
  /// hundreds of KiB or more. `bytes` must not change until the write completes.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_write(std::size_t offset, boost::asio::const_buffer bytes,
                   CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        detail::initiate_reply_write(sink_, ex_), token, offset, bytes);
  }
  /// As above, from memory the handler registered once (call_context::register_memory)
  /// that holds `bytes`: over RDMA nothing is registered for the write. A region on
  /// another device is not used (`bytes` are registered as above); `bytes` outside the
  /// region fail with errc::out_of_bounds, without writing anything or counting towards
  /// the reply. Completion signature, errors otherwise and cancellation as above;
  /// `bytes_memory` must stay registered until the write completes (the device reads it
  /// until then).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_write(std::size_t offset, boost::asio::const_buffer bytes,
                   const memory_region& bytes_memory, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, std::size_t)>(
        detail::initiate_reply_write(sink_, ex_), token, offset, bytes, &bytes_memory);
  }

  /// \cond INTERNAL
  bulk_reply(detail::reply_sink* sink, const executor_type& ex) noexcept
      : sink_(sink), ex_(ex) {}
  /// \endcond

private:
  detail::reply_sink* sink_;
  executor_type ex_;
};

/// How a method takes its calls (server::add_method).
struct method_options {
  /// Over RDMA, a bulk request is not read before the handler runs: the handler gets an
  /// empty request span and reads the request itself, piecewise, through
  /// call_context::request_bulk(). Off: every request is read whole first.
  bool reads_request_piecewise = false;
};

/// What a method's handler knows of its call.
class call_context {
public:
  /// The method's name.
  std::string_view method() const noexcept { return method_; }
  /// When the client stops waiting for the reply.
  std::chrono::steady_clock::time_point deadline() const noexcept { return deadline_; }
  /// True once the call is cancelled: the client cancelled it, its deadline passed, or the
  /// server's shutdown grace ran out. At that moment the handler's cancellation slot (its
  /// coroutine's: `co_await asio::this_coro::cancellation_state`) is emitted with
  /// cancellation_type::terminal, so the operation it awaits completes with
  /// operation_aborted. What the handler returns afterwards still goes to the client,
  /// which may have stopped waiting.
  bool cancelled() const noexcept { return cancelled_; }
  /// The request as a bulk handle, to read piecewise (bulk_request); for any method, and
  /// the only way to its bytes for a method with method_options::reads_request_piecewise
  /// given a bulk request.
  bulk_request& request_bulk() noexcept { return request_; }
  /// The reply as a bulk handle, to write piecewise (bulk_reply).
  bulk_reply& reply_bulk() noexcept { return reply_; }

  /// Registers `bytes` with the device of this call's connection, for the bulk handles'
  /// reads and writes to use without registering per piece (bulk_request::async_read and
  /// bulk_reply::async_write with a region). The region serves every connection on that
  /// device, so a handler may keep it for later calls. Registration is a system call
  /// that pins `bytes`: register long-lived buffers once.
  ///
  /// Errors: errc::operation_not_supported over TCP; the registration's own error.
  memory_region register_memory(std::span<std::byte> bytes, access flags,
                                boost::system::error_code& ec) const;
  /// As above, throwing boost::system::system_error.
  memory_region register_memory(std::span<std::byte> bytes, access flags) const;

  /// \cond INTERNAL
  call_context(std::string_view method, std::chrono::steady_clock::time_point deadline,
               const bulk_request& request, const bulk_reply& reply,
               asio_rdma::connection* rdma = nullptr) noexcept
      : method_(method), deadline_(deadline), request_(request), reply_(reply), rdma_(rdma) {}
  void mark_cancelled() noexcept { cancelled_ = true; }
  /// Made the context of another call (a server's calls are reused).
  void reset(std::string_view method, std::chrono::steady_clock::time_point deadline) noexcept {
    method_ = method;
    deadline_ = deadline;
    cancelled_ = false;
  }
  /// \endcond

private:
  std::string_view method_;
  std::chrono::steady_clock::time_point deadline_;
  bool cancelled_ = false;
  bulk_request request_;
  bulk_reply reply_;
  asio_rdma::connection* rdma_; // the call's connection over RDMA, else nullptr
};

/// A method: takes the request's bytes (valid until it returns) and its context, returns
/// the response's bytes. It runs as a coroutine on the server's executor, concurrently
/// with the other calls. To fail the call, throw: a boost::system::system_error whose code
/// is an rpc::errc reaches the client as that code, anything else as
/// errc::handler_failed; the exception's what() is the message the client gets.
using method_handler = std::function<boost::asio::awaitable<std::vector<std::byte>>(
    std::span<const std::byte> request, call_context& context)>;

namespace detail {
class server_impl;
void start_shutdown(const std::shared_ptr<server_impl>& impl, std::chrono::milliseconds grace,
                    asio_rdma::detail::pending_operation<void(boost::system::error_code)>&& op);

class initiate_shutdown
    : public asio_rdma::detail::io_initiation<std::shared_ptr<server_impl>,
                                              asio_rdma::detail::executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::chrono::milliseconds grace) const {
    if (!impl_) // a server moved from
      return closed(std::forward<Handler>(handler), boost::asio::error::bad_descriptor);
    start_shutdown(impl_, grace,
                   pending<void(boost::system::error_code)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// Serves methods to clients over RDMA and TCP.
///
/// Calls of one connection run concurrently and are answered in any order, up to
/// server_options::max_calls_per_connection at once per connection and max_calls in
/// all; more wait (their connection is not read meanwhile) and never fail for it. A
/// client that breaks the protocol (a malformed frame, a request above the limit it was
/// told, a duplicate call id) loses its connection; other clients are not affected.
///
/// Thread safety: one thread (or strand) at a time, handlers included: the server and its
/// handlers run on its executor. Destroying it closes every listener and connection at
/// once and cancels the calls running; async_shutdown() drains instead.
class server {
public:
  using executor_type = boost::asio::any_io_executor;

  /// A server with no methods that listens nowhere yet. Throws system_error
  /// (asio_rdma::errc::invalid_option) for invalid options.
  server(const executor_type& ex, const server_options& options);
  /// As above with the default options. (An overload, not a default argument: GCC 12
  /// destroys a default argument twice in a call that has a co_await among its arguments.)
  explicit server(const executor_type& ex);
  server(server&&) noexcept;
  server& operator=(server&&) noexcept;
  ~server();

  executor_type get_executor() const noexcept { return ex_; }

  /// Adds the method `name`. Throws std::invalid_argument if a method of that name, or of
  /// another name with the same id (method_id()), exists, and boost::system::system_error
  /// (asio::error::bad_descriptor) on a server moved from.
  void add_method(std::string_view name, method_handler handler);
  /// As above, with the method's options.
  void add_method(std::string_view name, method_handler handler, const method_options& options);

  /// Listens on `url` ("rdma://address:port" or "tcp://address:port"; port 0 picks one)
  /// and serves the connections it accepts. Returns the port listened on. Throws
  /// boost::system::system_error (errc::bad_endpoint, the bind's error,
  /// asio::error::bad_descriptor on a server moved from).
  std::uint16_t listen(std::string_view url);
  /// As above, reporting failure through `ec` (then it returns 0).
  std::uint16_t listen(std::string_view url, boost::system::error_code& ec);

  /// Serves an established connection (for a stream or socket accepted by the program).
  /// Throws boost::system::system_error (asio::error::bad_descriptor) on a server moved
  /// from, closing the connection.
  void serve(boost::asio::ip::tcp::socket socket);
  void serve(asio_rdma::stream stream);

  /// Drains the server: stops listening; new calls fail with errc::server_draining; the
  /// calls running get `grace` to finish, then are cancelled (their clients get
  /// errc::cancelled) and get up to one more second; then every connection is closed.
  /// Completion signature: void(error_code) (no error unless the server was already shut
  /// down: asio::error::operation_aborted; asio::error::bad_descriptor on a server moved
  /// from). Not cancellable.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_shutdown(std::chrono::milliseconds grace, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        detail::initiate_shutdown(impl_, ex_), token, grace);
  }

  /// Calls running or waiting for their reply to be written.
  std::size_t calls_in_flight() const noexcept;
  /// Connections being served.
  std::size_t connections() const noexcept;

private:
  std::shared_ptr<detail::server_impl> impl_;
  executor_type ex_;
};

} // namespace asio_rdma::rpc
