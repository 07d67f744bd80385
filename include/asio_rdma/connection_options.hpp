// asio-rdma: options of a connection (queue depths, message size, handshake).
#pragma once

#include <asio_rdma/completion_mode.hpp>
#include <asio_rdma/error.hpp>
#include <asio_rdma/shared_queues.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace asio_rdma {

/// Sizes and timeouts of one RC connection; used by async_connect and when
/// accepting. Every field has a working default; validate() says which value
/// is out of range.
struct connection_options {
  /// Work requests the send queue holds (sends, RDMA reads/writes, atomics in
  /// flight at once). Further operations wait, in order, in the library.
  std::uint32_t send_queue_depth = 64;
  /// Receive buffers the library keeps posted. A sender that outruns the
  /// receiver is held back by RNR retries (flow control), never failed.
  std::uint32_t receive_queue_depth = 64;
  /// Largest message async_send accepts and the size of each receive buffer.
  /// A peer's message larger than this fails the connection on both sides
  /// (an RC queue pair cannot skip a message), with a length error.
  std::size_t max_message_size = 64 * 1024;
  /// Scatter/gather entries per send / write / read work request.
  std::uint32_t max_send_sge = 4;
  /// Messages up to this size are sent inline (copied into the work request)
  /// when the device allows it; 0 disables inline sends.
  std::uint32_t max_inline_data = 64;
  /// Outstanding RDMA reads and atomics this side may issue / accept
  /// (clamped to what the device supports).
  std::uint8_t initiator_depth = 16;
  /// Incoming RDMA reads and atomics the peer may have outstanding at once
  /// (clamped to what the device supports).
  std::uint8_t responder_resources = 16;
  /// Time allowed for address/route resolution and the connection handshake
  /// (connect and accept), and for async_disconnect.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  /// Private data sent with the connect request (at most 56 bytes) or with the
  /// accept reply (at most 196 bytes). On InfiniBand and RoCE the peer sees it
  /// zero-padded to that fixed size.
  std::vector<std::byte> private_data;
  /// How completions are noticed (see completion_mode).
  asio_rdma::completion_mode completion_mode = asio_rdma::completion_mode::event;
  /// With completion_mode::adaptive: how long to keep polling after the last
  /// completion before waiting on the channel again.
  std::chrono::microseconds adaptive_spin = std::chrono::microseconds(200);
  /// Share one completion queue and one shared receive queue with other
  /// connections (see shared_queues). Empty: this connection has its own.
  /// With it, receive buffers and the completion mode are the shared ones.
  asio_rdma::shared_queues shared_queues;
  /// Optional local address to bind before resolving (empty: any).
  std::string source_address;

  /// Most private data a connect request carries (bytes).
  static constexpr std::size_t max_connect_private_data = 56;
  /// Most private data an accept reply carries (bytes).
  static constexpr std::size_t max_accept_private_data = 196;
  /// Most private data a rejection carries (bytes).
  static constexpr std::size_t max_reject_private_data = 148;
  /// Upper bound on max_message_size (1 GiB): RC allows 2 GiB, but every
  /// receive buffer is max_message_size bytes of registered memory.
  static constexpr std::size_t message_size_limit = std::size_t(1) << 30;

  /// Names the first option that is out of range, or returns nullptr.
  /// `private_data_limit` is the limit of the handshake the options are used for.
  const char* problem(std::size_t private_data_limit = max_connect_private_data) const {
    if (send_queue_depth == 0 || send_queue_depth > 16384)
      return "send_queue_depth must be 1..16384";
    if (receive_queue_depth == 0 || receive_queue_depth > 16384)
      return "receive_queue_depth must be 1..16384";
    if (max_message_size == 0 || max_message_size > message_size_limit)
      return "max_message_size must be 1 byte..1 GiB";
    if (max_send_sge == 0 || max_send_sge > 32)
      return "max_send_sge must be 1..32";
    if (max_inline_data > 1024)
      return "max_inline_data must be at most 1024";
    if (timeout.count() <= 0)
      return "timeout must be positive";
    if (private_data.size() > private_data_limit)
      return "private_data is longer than the handshake allows (56 bytes to connect, 196 to "
             "accept, 148 to reject)";
    return nullptr;
  }

  /// errc::invalid_option if problem() names one, else success.
  error_code validate(std::size_t private_data_limit = max_connect_private_data) const {
    return problem(private_data_limit) ? error_code(errc::invalid_option) : error_code();
  }
};

} // namespace asio_rdma
