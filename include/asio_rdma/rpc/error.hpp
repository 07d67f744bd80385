// asio-rdma RPC: the errors a call can end with, besides the transport's own.
#pragma once

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <iosfwd>
#include <span>
#include <string_view>
#include <type_traits>

namespace asio_rdma::rpc {

/// Errors of the RPC layer (category "asio_rdma.rpc"). A call that fails on the server
/// completes with one of these and, as its reply's bytes, the server's message (see
/// message_of()). The transport's errors (a lost connection: connection_reset, eof,
/// a work completion's status) and asio::error::operation_aborted (the caller's own
/// cancellation) come as they are.
enum class errc {
  /// The server has no method of that name.
  unknown_method = 1,
  /// The request is larger than the server accepts (its server_options::max_request_size,
  /// which it announced at connect): nothing was sent.
  request_too_large,
  /// The reply is larger than the client accepts (client_options::max_response_size).
  response_too_large,
  /// The call's deadline passed before its reply came; the server was told to cancel it.
  deadline_exceeded,
  /// The server cancelled the call (it was draining and the grace period ran out).
  cancelled,
  /// The server is draining (server::async_shutdown): it takes no new calls.
  server_draining,
  /// The method's handler threw; the message is its exception's.
  handler_failed,
  /// The peer sent a frame that breaks the protocol (docs/rpc.md); the connection is closed.
  protocol_error,
  /// The other side speaks another version of the protocol.
  version_mismatch,
  /// The channel is down after a failure and reconnects after a backoff; the call was not
  /// sent (calls fail fast meanwhile instead of waiting for a server that is not there).
  unavailable,
  /// An endpoint that is not "rdma://host:port" or "tcp://host:port".
  bad_endpoint,
  /// A typed call's reply (or a typed method's request) could not be decoded as its type.
  decode_failed,
};

/// The category of rpc::errc ("asio_rdma.rpc").
const boost::system::error_category& rpc_category() noexcept;

/// Makes errc usable as an error_code.
inline boost::system::error_code make_error_code(errc e) noexcept {
  return boost::system::error_code(static_cast<int>(e), rpc_category());
}

/// Writes the error's message (for logs and test diagnostics).
std::ostream& operator<<(std::ostream& os, errc e);

/// The server's message carried by a failed call's reply bytes, as text.
inline std::string_view message_of(std::span<const std::byte> reply) noexcept {
  return std::string_view(reinterpret_cast<const char*>(reply.data()), reply.size());
}

} // namespace asio_rdma::rpc

namespace boost::system {
template <> struct is_error_code_enum<asio_rdma::rpc::errc> : std::true_type {};
} // namespace boost::system
