// asio-rdma: how completions are noticed.
#pragma once

namespace asio_rdma {

/// How a connection learns about completed work.
enum class completion_mode {
  /// Wait on the completion channel (an fd in the io_context): no CPU while
  /// idle; one wake-up per batch of completions.
  event,
  /// Poll the completion queue from the io_context, continuously, while any
  /// operation is pending: lowest latency, one core busy meanwhile.
  busy_poll,
  /// Poll while there is activity, and fall back to waiting on the channel
  /// after `adaptive_spin` without any completion.
  adaptive,
};

} // namespace asio_rdma
