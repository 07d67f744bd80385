// asio-rdma RPC: options of clients and servers, and where a service is.
#pragma once

#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/stream.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace asio_rdma::rpc {

/// The transport under a client or a server.
enum class transport_kind : std::uint8_t {
  /// An asio_rdma::stream (an RC connection with an RDMA-write ring; docs/stream.md).
  rdma,
  /// An asio::ip::tcp::socket (TCP_NODELAY and keepalive on): for hosts without RDMA.
  tcp,
};

/// "rdma://host:port" or "tcp://host:port", parsed. `host` may be a name or an address
/// (IPv6 in brackets: "tcp://[::1]:7000"); the port is 0..65535 (0 to listen on any).
struct endpoint {
  transport_kind transport = transport_kind::tcp;
  std::string host;
  std::uint16_t port = 0;

  /// The endpoint `url` names, or nothing if it is malformed.
  static std::optional<endpoint> parse(std::string_view url);
};

/// When a call marked idempotent (call_options::idempotent) is made again after it failed.
/// Only failures that say nothing of the server's answer are retried: the connection lost
/// or not established (the transport's error), errc::unavailable (the channel's backoff;
/// the retry waits for its end) and errc::server_draining. A reply, any other error the
/// server sends, deadline_exceeded, request_too_large, response_too_large and the
/// caller's cancellation end the call at once. The call's deadline counts from its first
/// attempt and bounds them all; a call that runs out of attempts, or whose next attempt
/// could not start before its deadline, fails with the last attempt's error.
struct retry_policy {
  /// Attempts of an idempotent call in all, the first included (1: never retried).
  unsigned max_attempts = 3;
  /// The wait before the first retry, doubled before each next one (and never shorter
  /// than what is left of the channel's reconnect backoff).
  std::chrono::milliseconds backoff = std::chrono::milliseconds(50);
};

/// Options of an rpc::client.
struct client_options {
  /// The deadline of a call that is given none (call_options): its reply must come within
  /// it, or the call fails with errc::deadline_exceeded and the server is told to cancel.
  std::chrono::milliseconds default_deadline = std::chrono::seconds(30);
  /// Establishing a connection (connect and the protocol's hello) may take this long.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(10);
  /// After a connection fails, calls fail at once with errc::unavailable for this long,
  /// then the next call connects again; each failure in a row doubles it, up to
  /// max_reconnect_backoff; a success resets it.
  std::chrono::milliseconds reconnect_backoff = std::chrono::milliseconds(100);
  std::chrono::milliseconds max_reconnect_backoff = std::chrono::seconds(5);
  /// The largest reply accepted; a larger one fails its call with
  /// errc::response_too_large (its bytes are read and dropped).
  std::size_t max_response_size = std::size_t(64) << 20;
  /// Over RDMA: the connection's options (keepalive is turned on when it is off: 1 s x 3)
  /// and the stream's ring and send buffer.
  connection_options rdma_connection = stream_connection_options();
  stream_options rdma_stream = {};
  /// How calls marked idempotent are retried (others never are).
  retry_policy retry = {};
  /// Over RDMA, a request of at least this many bytes is not copied through the stream:
  /// its memory is registered for the server to RDMA-read (docs/rpc.md, "Bulk"). 0: never.
  /// Over TCP it travels in the stream either way.
  std::size_t bulk_threshold = 64 * 1024;
  /// A call that exposed its reply buffer (call_options::expose_reply_buffer) and ended
  /// (cancelled, deadline) waits this long for the server's answer, since the server may
  /// write into the buffer until then; after it the connection is failed, which stops
  /// those writes, and its other calls fail with asio::error::timed_out.
  std::chrono::milliseconds reply_buffer_grace = std::chrono::seconds(1);

  /// Why these options are invalid, or nullptr.
  const char* invalid() const noexcept;
};

/// Options of an rpc::server.
struct server_options {
  /// The largest request accepted (told to clients at connect, which refuse larger ones
  /// with errc::request_too_large before sending them).
  std::size_t max_request_size = std::size_t(64) << 20;
  /// Calls of one connection running at once; more wait (the connection is not read
  /// meanwhile), never fail. As many ended calls are kept for the next requests (each
  /// with up to 16 KiB of its request's memory): a call in steady state allocates none.
  std::size_t max_calls_per_connection = 64;
  /// Calls of the whole server running at once; more wait, never fail.
  std::size_t max_calls = 1024;
  /// Connections over RDMA: as client_options.
  connection_options rdma_connection = stream_connection_options();
  stream_options rdma_stream = {};
  /// Over RDMA, a reply of at least this many bytes is not copied through the stream: its
  /// memory is registered for the client to RDMA-read, and held until the client has
  /// (docs/rpc.md, "Bulk"). 0: never.
  std::size_t bulk_threshold = 64 * 1024;

  /// Why these options are invalid, or nullptr.
  const char* invalid() const noexcept;
};

/// Options of one call.
struct call_options {
  /// The call's deadline from now; zero: client_options::default_deadline.
  std::chrono::milliseconds deadline{0};
  /// The method may run more than once for this call with the same effect as once (a
  /// read, a put of a whole value): the client may send it again after a failure, as
  /// client_options::retry says. Off: a call is sent at most once, never retried.
  /// (A retried call costs one allocation for its retry state; others cost none.)
  bool idempotent = false;
  /// Over RDMA, for a call whose reply goes into the caller's buffer: the buffer is
  /// registered for the server to write into, so a handler that writes its reply through
  /// call_context::reply_bulk() puts it there piecewise by RDMA write, without holding it
  /// whole (docs/rpc.md, "Bulk payloads"). The call then completes only once the server
  /// has answered, even when cancelled or past its deadline, since the handler may write
  /// until then; a server that has not answered client_options::reply_buffer_grace (1 s)
  /// after that loses its connection (which stops any write), and the connection's other
  /// calls fail with asio::error::timed_out.
  /// Ignored over TCP (the reply then comes through the stream).
  bool expose_reply_buffer = false;
  /// Over RDMA: memory the caller registered once (rpc::client::register_memory) that
  /// holds the request, with access::remote_read. A bulk request (bulk_threshold) is then
  /// advertised from it as it is, without a registration of its own (a system call that
  /// pins the pages, per call). The region must lie on the device of the call's
  /// connection; after a reconnection through another device the call registers its
  /// request as without it. A request outside the region fails the call with
  /// errc::out_of_bounds, a region without remote read with asio::error::invalid_argument,
  /// both before anything is sent.
  ///
  /// The server can read every byte of the region, not only the request's (its remote
  /// key covers it all): register for this only memory that server may see. A call whose
  /// request it advertises completes only once the server has answered, even when
  /// cancelled or past its deadline, as with expose_reply_buffer (and within the same
  /// reply_buffer_grace), since the server may read it until then; the region must stay
  /// registered until the call has completed. Ignored over TCP and below bulk_threshold.
  const memory_region* request_memory = nullptr;
  /// As request_memory, for the reply buffer that expose_reply_buffer exposes to the
  /// server's writes: registered memory holding it, with access::local_write and
  /// access::remote_write. The server can write every byte of the region. Ignored unless
  /// expose_reply_buffer is set.
  const memory_region* reply_memory = nullptr;
};

} // namespace asio_rdma::rpc
