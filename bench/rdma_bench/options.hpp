// rdma_bench: what a run measures (operation, mode, sizes, depths) and the
// command line that sets it.
#pragma once

#include <CLI/App.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rdma_bench {

/// The RDMA operation a test issues. Values travel on the wire (wire.hpp).
enum class operation : std::uint8_t {
  send = 1,
  write = 2,
  write_imm = 3,
  read = 4,
  fetch_add = 5,
  compare_swap = 6,
  /// Unreliable datagrams (datagram_socket); not on the wire of RC tests.
  ud_send = 7,
  /// A byte stream (asio_rdma::stream) over the connection: streams.hpp.
  stream = 8,
  /// asio_rdma::rpc calls (an echo) over a stream on the connection: rpc_calls.hpp.
  rpc = 9,
};

/// bandwidth: as many operations in flight as the depth allows, measures
/// Gb/s and messages/s. latency: one at a time, ping-pong, measures µs.
enum class test_mode : std::uint8_t { bandwidth = 1, latency = 2 };

/// How completions are waited for (framework: connection_options; raw
/// verbs: busy polling of the CQ or its completion channel).
enum class completion_mode : std::uint8_t { event = 0, busy = 1, adaptive = 2 };

std::string_view name(operation op);
std::string_view name(test_mode mode);
std::string_view name(completion_mode mode);
/// True for fetch-add and compare-swap (8-byte operations).
inline bool is_atomic(operation op) {
  return op == operation::fetch_add || op == operation::compare_swap;
}

struct settings {
  std::string role; // "server" or "client"
  std::string host = "0.0.0.0";
  std::uint16_t port = 7472;
  bool raw_verbs = false;

  operation op = operation::send;
  test_mode mode = test_mode::bandwidth;
  std::vector<std::size_t> sizes{65536};
  double duration = 2.0;        // seconds per size (when iterations == 0)
  std::uint64_t iterations = 0; // measured operations per size; 0: use duration
  double warmup = 0.5;          // seconds before measuring starts
  std::uint32_t depth = 128;    // operations in flight per connection
  std::uint32_t connections = 1;
  bool shared_queues = false;   // framework client: its connections share one CQ and SRQ
  std::uint32_t coroutines = 0; // framework: coroutines per connection; 0: one per slot of depth
  std::uint32_t batch = 1;      // framework bandwidth: operations per async_batch (1: one each)
  /// Framework ping-pong latency (send, write, write_imm): false: co_await the request, then the reply;
  /// true: post the request (its completion goes to a callback) and co_await only the reply,
  /// as perftest's ib_send_lat / ib_write_lat wait for the reply alone.
  bool lat_post_send = false;
  /// Framework: both ends' copied sends complete on acknowledgement
  /// (connection_options::send_completion; default: when posted).
  bool acknowledged_sends = false;
  /// Framework send (both ends): send from plain memory (`async_send(asio::buffer(...))`,
  /// which the library copies: into the work request inline, or its own registered slot)
  /// instead of from a registered region (`async_send(local_buffer)`, zero-copy).
  bool copied_sends = false;
  /// Raw verbs, send latency (both ends): each step of the ping-pong awaited through
  /// Asio's use_awaitable, with no library in between (asio_floor.hpp).
  bool asio_floor = false;
  completion_mode completion = completion_mode::event; // raw verbs: busy unless given
  /// --completion adaptive: how long to keep polling after a completion, in µs, at both
  /// ends (connection_options::adaptive_spin); 0: the library's default.
  std::uint32_t adaptive_spin_us = 0;
  bool completion_given = false;
  bool bidirectional = false;
  /// --op rpc: the echo through bulk handles (the client exposes its reply buffer, the
  /// handler writes the request back through reply_bulk()) instead of a returned vector.
  bool rpc_bulk_handles = false;
  bool rpc_registered = false; // --op rpc: request and reply in memory registered once
  /// --op stream: how the client's writes reach the server (stream_options::transfer).
  enum class stream_transfer_mode { automatic, push, shared };
  stream_transfer_mode stream_transfer = stream_transfer_mode::automatic;
  std::uint32_t inline_size = 64;
  /// The client's connections let SoftiWARP send large payloads from their buffers
  /// (connection_options::siw_zero_copy): rdma_bench never changes a buffer's content.
  bool siw_zero_copy = false;
  /// After the run, print each client connection's connection_statistics (posts, work
  /// requests, signalled, inline) to stderr.
  bool statistics = false;
  std::string json_path;
  bool quiet = false; // no progress lines
  /// Connection handshake bound, and keepalive of the client's connections
  /// (0: off). Not on rdma_bench's command line; rdma_fabric sets them so that
  /// a dead peer ends a measurement instead of stalling it.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(30);
  std::chrono::milliseconds keepalive_interval = std::chrono::milliseconds(0);
};

/// Declares rdma_bench's subcommands (server, client) and options in `app`;
/// parsing fills `s`, and a final check (check() below) throws
/// asio_rdma::cli::usage_error for combinations that make no sense.
void describe(CLI::App& app, settings& s);

/// Parses argv into settings (for tests); throws asio_rdma::cli::usage_error
/// with a clear message. Returns a settings with role "help" for --help.
settings parse_command_line(int argc, char** argv);

/// Checks a combination of settings (also used by the server on what a
/// client asks for); returns an explanation or an empty string.
std::string check(const settings& s);

} // namespace rdma_bench
