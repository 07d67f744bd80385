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

/// When async_send and async_send_with_imm complete: the sends whose bytes the library
/// copies (into the work request, inline, or into its own registered send slot), not the
/// zero-copy sends of registered memory, one-sided operations or batches, which always
/// complete with their work completion.
enum class send_completion : std::uint8_t {
  /// As soon as the message is posted (its bytes copied), as a TCP send completes once the
  /// kernel has the bytes, and as UCX's eager sends do: the handler runs without waiting
  /// for the peer's acknowledgement, and the work request asks for no completion of its
  /// own (one in 16 does, to recycle the send queue). A completed send says the bytes left
  /// the caller, not that they arrived: a transport error that comes later (the peer gone,
  /// no receive buffer after the RNR retries) fails the connection, and every pending and
  /// later operation gets that error. close() and async_disconnect wait, up to 2 s and
  /// the connection's timeout, for the peer to acknowledge such sends before they
  /// disconnect, so a message completed before them is not lost to the close.
  /// RC's order is kept: while work posted before a send still waits for its own
  /// completion (an RDMA write or read, a zero-copy send, an atomic), that send completes
  /// on acknowledgement too, so its completion still says everything posted before it has
  /// completed ("write the data, send the notice, reuse the buffer when the notice
  /// completes" stays correct).
  /// On iWARP devices sends complete at_acknowledgement whatever this option says: iWARP
  /// completes a send once its TCP connection took the bytes, so there is little to gain,
  /// and SoftiWARP did not finish closing shared-queue connections that had unsignalled
  /// sends outstanding.
  at_post,
  /// When the work completion arrives, i.e. the peer's transport acknowledged the message
  /// (RC): an error of the send itself completes that send.
  at_acknowledgement,
};

/// Sizes and timeouts of one RC connection; used by async_connect and when
/// accepting. Every field has a working default; validate() says which value
/// is out of range.
struct connection_options {
  /// Work requests the send queue holds (sends, RDMA reads/writes, atomics in
  /// flight at once). Further operations wait, in order, in the library.
  /// Beyond the device's device_limits::max_qp_wr, or with receive_queue_depth
  /// beyond its max_cqe, the connection fails with errc::device_limit_exceeded.
  std::uint32_t send_queue_depth = 64;
  /// Receive buffers the library keeps posted. A sender that outruns the
  /// receiver is held back by RNR retries (flow control), never failed. On
  /// iWARP, which has no RNR retry, by the library's credits instead: the
  /// receiver tells the sender (an RDMA write, no receive used) how many
  /// buffers it has posted, and the sender's messages wait, in order, until
  /// one is free (docs/devices.md).
  /// Refused like send_queue_depth beyond the device's limits. Elsewhere than
  /// on iWARP, a ring of 16 or more reposts the buffers it is given back in
  /// batches of depth / 8 (at most 8): up to two batches fewer may be posted
  /// at a moment (connection_statistics::receive_posts).
  std::uint32_t receive_queue_depth = 64;
  /// Largest message async_send accepts and the size of each receive buffer.
  /// A peer's message larger than this fails the connection on both sides
  /// (an RC queue pair cannot skip a message), with a length error.
  std::size_t max_message_size = 64 * 1024;
  /// Scatter/gather entries per send / write / read work request; clamped to
  /// the device's device_limits::max_sge (siw: 6). A request with more fails
  /// with asio::error::invalid_argument before it is posted.
  std::uint32_t max_send_sge = 4;
  /// Sends and RDMA writes up to this size go inline (their bytes copied into
  /// the work request when it is posted, so the device fetches nothing from
  /// memory) when the device allows it; 0 disables inline data. Lowered to
  /// what the device takes (halved until it accepts; siw takes 80 bytes, some
  /// devices none).
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
  /// How long a sender waits before retrying a message that found no receive
  /// buffer posted at this side (the responder's RNR NAK timer, which this
  /// side advertises to its peer). Receive buffers running out is the flow
  /// control of async_send, so this is the pause a fast sender takes when it
  /// outruns a slow receiver. Rounded up to the next value the transport can
  /// encode (10 us .. 491.52 ms); rdma_cm's own default would be 655 ms.
  /// Devices round it further up to their timer resolution (rxe: one kernel
  /// tick, 1-4 ms). On iWARP (credits, see receive_queue_depth) a sender with
  /// nothing in flight looks for freed buffers again after this long.
  std::chrono::microseconds rnr_retry_delay = std::chrono::microseconds(640);
  /// Transport (ACK) timeout: 4.096 us x 2^ack_timeout_exponent before a
  /// request without acknowledgement is sent again (1..31; default 15, about
  /// 134 ms).
  std::uint8_t ack_timeout_exponent = 15;
  /// Retransmissions before the transport gives up (0..7). Then every posted
  /// operation fails with a wc_condition::transport error
  /// (IBV_WC_RETRY_EXC_ERR) and the connection closes. A peer host that died
  /// while work was posted is therefore reported within
  /// transport_give_up_time() (about 0.94 s with the defaults). Note that
  /// SoftRoCE (rxe) treats 7 as "retry forever", so the default is 6.
  std::uint8_t retry_count = 6;
  /// Opt-in keepalive for idle connections: RC notices nothing of a dead peer
  /// while no work is posted. With an interval, a connection on which nothing
  /// completed for one interval posts a zero-length RDMA write (which needs
  /// nothing from the peer's application nor any memory of it); after
  /// keepalive_count silent intervals in a row the connection fails with
  /// asio::error::timed_out (pending receives and later operations get it),
  /// unless the transport reported the dead peer earlier. While user work is
  /// posted, the transport's own retries (above) are the bound instead, so a
  /// slow but living receiver is never mistaken for a dead one.
  /// Zero (the default) turns keepalive off. A connection with keepalive keeps
  /// a timer pending in the io_context while it is open.
  std::chrono::milliseconds keepalive_interval = std::chrono::milliseconds(0);
  /// Silent keepalive intervals after which the peer counts as dead (1..1000).
  std::uint32_t keepalive_count = 3;
  /// SoftiWARP (siw) only; every other device ignores it. siw sends the
  /// payload of a send or RDMA write of more than a page straight from the
  /// caller's memory unless the request asks for its own completion, and a
  /// completion there means that TCP has the bytes, not that they have left:
  /// TCP may read the memory again to transmit or retransmit them. So by
  /// default the library has every such request on siw signalled, and siw
  /// copies its payload (64 KiB writes: about 0.8x the bandwidth of zero
  /// copy in the test VM). true lets siw send from the caller's memory: set it
  /// only where the memory of a completed send or write is not changed until
  /// the peer has answered for it (a reply, an acknowledgement), or where its
  /// content does not matter (rdma_bench). Hardware iWARP NICs keep the verbs
  /// contract (a completed request's memory may be reused) and need neither.
  bool siw_zero_copy = false;
  /// When copied sends complete (see send_completion): when posted by default, for the
  /// lowest latency; at_acknowledgement for RC's own contract (a send's error completes
  /// that send).
  asio_rdma::send_completion send_completion = asio_rdma::send_completion::at_post;
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
    if (rnr_retry_delay.count() < 10 || rnr_retry_delay > std::chrono::microseconds(491520))
      return "rnr_retry_delay must be 10 us..491.52 ms";
    if (ack_timeout_exponent == 0 || ack_timeout_exponent > 31)
      return "ack_timeout_exponent must be 1..31";
    if (retry_count > 7)
      return "retry_count must be 0..7";
    if (keepalive_interval.count() < 0)
      return "keepalive_interval must not be negative";
    if (keepalive_count == 0 || keepalive_count > 1000)
      return "keepalive_count must be 1..1000";
    if (send_completion != asio_rdma::send_completion::at_post &&
        send_completion != asio_rdma::send_completion::at_acknowledgement)
      return "send_completion must be at_post or at_acknowledgement";
    if (private_data.size() > private_data_limit)
      return "private_data is longer than the handshake allows (56 bytes to connect, 196 to "
             "accept, 148 to reject)";
    return nullptr;
  }

  /// How long the transport retries an unacknowledged request before it
  /// fails: 4.096 us x 2^ack_timeout_exponent x (retry_count + 1).
  std::chrono::microseconds transport_give_up_time() const {
    const double us = 4.096 * double(std::uint64_t(1) << ack_timeout_exponent) * (retry_count + 1);
    return std::chrono::microseconds(static_cast<std::int64_t>(us));
  }

  /// errc::invalid_option if problem() names one, else success.
  error_code validate(std::size_t private_data_limit = max_connect_private_data) const {
    return problem(private_data_limit) ? error_code(errc::invalid_option) : error_code();
  }
};

} // namespace asio_rdma
