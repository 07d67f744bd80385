// asio-rdma: counters of one connection's posting paths (what the device was
// asked to do), for tests, tuning and monitoring.
#pragma once

#include <cstdint>

namespace asio_rdma {

/// What a connection has posted to its send queue since it was created. The
/// counters are plain integers incremented on the posting path (no lock, no
/// allocation); read them with connection::statistics() from the
/// connection's executor.
///
/// Work requests (sends, RDMA writes and reads, atomics) initiated in the same
/// turn of the io_context are chained into one post, except that a request
/// finding the send queue idle is posted at once (latency): `posts` counts
/// the ibv_post_send calls, `work_requests` the requests they carried.
/// Selective signalling: within one post, every 16th request asks for a
/// completion, and so does the last one of the post (so nothing waits on a
/// later one); the others complete silently, in order, with the next
/// signalled one (errors are always reported, signalled or not).
struct connection_statistics {
  /// ibv_post_send calls (each carries at least one request).
  std::uint64_t posts = 0;
  /// Work requests posted.
  std::uint64_t work_requests = 0;
  /// Sends and RDMA writes posted inline (the payload copied into the work
  /// request when it is posted: at most connection_options::max_inline_data
  /// bytes, when the device supports inline data).
  std::uint64_t inline_sends = 0;
  /// Work requests posted with a completion requested (IBV_SEND_SIGNALED).
  std::uint64_t signaled = 0;
  /// ibv_post_recv calls that reposted receive buffers of the connection's own ring (none
  /// with shared_queues, whose buffers are the shared ones). Buffers given back are
  /// reposted together once 1/8 of the ring (at most 8) are, or at once when fewer than
  /// all but 2 such batches are posted; a ring of fewer than 16 buffers, or on iWARP (whose
  /// posts are reported to the peer as credit), reposts each at the end of its turn.
  std::uint64_t receive_posts = 0;
  /// Receive buffers those calls posted (the first post: the whole ring).
  std::uint64_t receives_posted = 0;
};

} // namespace asio_rdma
