// The send queue's bookkeeping, with no verbs call in it: which initiated
// requests fit into the queue pair's send queue, which of them ask for a
// completion (selective signalling), and which requests a completion
// completes. connection_impl posts the chains take() builds and feeds the
// completions back; test/unit/rc/send_window_test.cpp drives the same logic
// with plain requests, without a device.
#pragma once

#include "async/object_pool.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace asio_rdma::detail {

/// `Request` derives from queue_hook (for the intrusive queues), has an
/// `ibv_send_wr wr` that take()'s `prepare` fills in, says by
/// `takes_peer_receive()`, before it is prepared, whether it uses a receive at the peer
/// (a send, or a write with immediate data), and by a `bool completed_at_post` that
/// `prepare` sets, whether nothing waits for its completion (a copied send whose handler
/// ran when it was posted: connection_options::send_completion).
template <typename Request> class send_window {
public:
  /// One completion per this many requests. RC completes in order, so a
  /// completion also completes the unsignalled requests posted before it
  /// (errors are reported whether signalled or not).
  static constexpr std::uint32_t signal_interval = 16;

  /// The requests take() chained, ready for one ibv_post_send.
  struct chain {
    ibv_send_wr* first = nullptr;
    std::uint32_t requests = 0;
    std::uint32_t signaled = 0;
  };

  /// How many requests may be posted and not yet completed.
  void set_depth(std::uint32_t depth) noexcept { depth_ = depth; }

  /// The device is iWARP, which may complete RDMA reads and atomics after requests posted
  /// later (SoftiWARP completes a read when its response arrives, a later send when TCP
  /// has it). Each read and atomic then asks for its own completion, and only that
  /// completes it.
  void set_iwarp(bool iwarp) noexcept { iwarp_ = iwarp; }
  /// SoftiWARP sends an unsignalled request's payload of more than a page straight from
  /// the user's pages (zero copy): TCP reads them when it transmits, possibly after a
  /// later request has completed and the memory been reused. With `on`, such a request
  /// asks for its own completion, so that siw copies it instead
  /// (connection_options::siw_zero_copy turns this off).
  void set_signal_large_payloads(bool on) noexcept { signal_large_payloads_ = on; }

  /// Flow control by credits (credit_flow.hpp), for transports without RNR retry: from
  /// now on a request that takes a receive at the peer is chained only while the peer has
  /// posted more receives than were taken. `peer_posted` is the peer's count of receives
  /// posted (modulo 2^32), first its receive depth.
  void limit_by_credits(std::uint32_t peer_posted) noexcept {
    credit_limited_ = true;
    peer_posted_ = peer_posted;
    taken_ = 0;
  }
  /// The peer's count of receives posted, as it last reported it. A count older than the
  /// one known (reports may be read in any order) changes nothing.
  void peer_posted(std::uint32_t posted) noexcept {
    if (std::int32_t(posted - peer_posted_) > 0)
      peer_posted_ = posted;
  }
  bool credit_limited() const noexcept { return credit_limited_; }
  /// The next queued request takes a receive at the peer, and the peer has none free for it.
  bool waits_for_credits() noexcept {
    if (!credit_limited_)
      return false; // RoCE and InfiniBand: take()'s loop pays one branch
    const Request* r = queued_.front();
    return r && r->takes_peer_receive() && peer_posted_ == taken_;
  }

  /// Posted requests that have not completed.
  std::uint32_t outstanding() const noexcept { return outstanding_; }
  /// Posted signalled requests that have not completed: while there is one, a completion
  /// will come (and with it the chance to post more). Requests completed at post may sit
  /// unsignalled at the window's end with none coming: they leave it with the next
  /// signalled request's completion, or the close's flush.
  std::uint32_t signalled_outstanding() const noexcept { return signalled_; }
  /// The latest request posted asked for no completion and is not known complete: if the
  /// peer has acknowledged it, the device reports nothing of it, not even when the queue
  /// pair fails (a flush reports only what is still queued). Only a later signalled
  /// request's completion takes it out of the window.
  bool silent_tail() const noexcept { return outstanding_ > 0 && tail_unsignalled_; }
  /// The send queue has no room for another request.
  bool full() const noexcept { return outstanding_ >= depth_; }
  /// Some initiated request waits for room in the send queue.
  bool has_queued() const noexcept { return !queued_.empty(); }

  /// An initiated request joins the queue; take() posts it in turn.
  void queue(Request* r) noexcept { queued_.push(r); }
  /// A request that may overtake every queued one (one whose order does not matter, as a
  /// keepalive probe) joins the queue at its head: held-back messages do not hold it.
  void queue_first(Request* r) noexcept { queued_.push_front(r); }
  /// Takes back a queued request, one that take() has not chained (cancellation).
  void withdraw(Request* r) noexcept { queued_.remove(r); }
  /// The request queued after queued request `r`, or null (a batch's requests are queued
  /// one after another).
  Request* queued_after(Request* r) noexcept { return queued_.after(r); }
  /// The next queued request, removed (close completes them all).
  Request* pop_queued() noexcept { return queued_.pop(); }

  /// Chains as many queued requests, in order, as the send queue has room
  /// for. `prepare(request)` fills in request->wr (its signalled flag is
  /// decided here). The last request of a chain is signalled when a request since the
  /// last signalled one waits for its completion (nothing may wait on a completion that
  /// never comes), and when it fills the window (posting resumes with a completion).
  template <typename Prepare> chain take(Prepare&& prepare) {
    chain c;
    ibv_send_wr* last = nullptr;
    bool awaited = false; // a request chained since the last signalled one waits for it
    while (outstanding_ < depth_) {
      if (waits_for_credits())
        break; // in order: what is queued behind it waits too
      Request* r = queued_.pop();
      if (!r)
        break;
      if (credit_limited_ && r->takes_peer_receive())
        ++taken_;
      prepare(r);
      r->wr.send_flags &= ~unsigned(IBV_SEND_SIGNALED);
      if (completes_alone(r) || copied_only_if_signalled(r) || ++unsignalled_ >= signal_interval) {
        r->wr.send_flags |= IBV_SEND_SIGNALED;
        unsignalled_ = 0;
        awaited = false;
        ++c.signaled;
      } else if (!r->completed_at_post) {
        awaited = true;
      }
      r->wr.next = nullptr;
      (last ? last->next : c.first) = &r->wr;
      last = &r->wr;
      ++c.requests;
      ++outstanding_;
      posted_.push(r);
    }
    if (last && !(last->send_flags & IBV_SEND_SIGNALED) && (awaited || outstanding_ == depth_)) {
      last->send_flags |= IBV_SEND_SIGNALED;
      unsignalled_ = 0;
      ++c.signaled;
    }
    signalled_ += c.signaled;
    if (last)
      tail_unsignalled_ = !(last->send_flags & IBV_SEND_SIGNALED);
    return c;
  }

  /// ibv_post_send refused the chain from `bad` on: those requests (the
  /// newest) leave the window, and each goes to `f`, oldest first.
  template <typename F> void unposted(const ibv_send_wr* bad, F&& f) {
    std::size_t count = 0;
    for (const ibv_send_wr* wr = bad; wr; wr = wr->next)
      ++count;
    posted_.drop_tail(count, [&](Request* r) {
      leave(r);
      if (credit_limited_ && r->takes_peer_receive())
        --taken_; // never reached the peer
      f(r);
    });
  }

  /// The completion of `r` arrived (with `status`): the unsignalled requests
  /// posted before it completed successfully (but for reads and atomics that complete
  /// alone, which stay). Each leaves the window and goes to `f(request, status)`, oldest
  /// first. `f` may queue and take more. `r` must be posted and not completed: the device
  /// reports each signalled request once (no membership check on this path).
  template <typename F> void completed(Request* r, ibv_wc_status status, F&& f) {
    // From the front again after each `f`, which may have changed the window; the reads
    // skipped on the way are few (at most the read depth), and none when in order.
    Request* earlier = next_completed_by(r);
    for (; earlier && earlier != r; earlier = next_completed_by(r)) {
      posted_.remove(earlier);
      leave(earlier);
      f(earlier, IBV_WC_SUCCESS);
    }
    if (earlier == r) {
      posted_.remove(r);
      leave(r);
      f(r, status);
    }
  }

  /// The next posted request, removed: for a close after which the device
  /// will report nothing more (the queue pair is destroyed).
  Request* pop_posted() noexcept {
    Request* r = posted_.pop();
    if (r)
      leave(r);
    return r;
  }

private:
  void leave(const Request* r) noexcept {
    --outstanding_;
    if (r->wr.send_flags & IBV_SEND_SIGNALED)
      --signalled_;
  }
  bool completes_alone(const Request* r) const noexcept {
    const auto op = r->wr.opcode;
    return iwarp_ && (op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
                      op == IBV_WR_ATOMIC_FETCH_AND_ADD);
  }
  /// An iWARP request whose payload SoftiWARP would send zero copy unless signalled: more
  /// than a page (its threshold), not inline.
  bool copied_only_if_signalled(const Request* r) const noexcept {
    if (!signal_large_payloads_ || (r->wr.send_flags & IBV_SEND_INLINE))
      return false;
    std::size_t bytes = 0;
    for (int i = 0; i < r->wr.num_sge; ++i)
      bytes += r->wr.sg_list[i].length;
    return bytes > zero_copy_threshold;
  }
  static constexpr std::size_t zero_copy_threshold = 4096;
  /// The oldest posted request that the completion of `r` completes: `r` itself when
  /// none before it is left (reads that complete alone are passed over), or null when
  /// `r` is not posted.
  Request* next_completed_by(Request* r) noexcept {
    Request* e = posted_.front();
    while (e && e != r && completes_alone(e))
      e = posted_.after(e);
    return e;
  }

  intrusive_queue<Request> queued_; // initiated, not yet posted
  intrusive_queue<Request> posted_; // posted, in completion order
  std::uint32_t depth_ = 0;
  std::uint32_t outstanding_ = 0;
  std::uint32_t signalled_ = 0; // of them signalled
  // Requests posted since the last signalled one (across chains: sends completed at post
  // may end a chain unsignalled).
  std::uint32_t unsignalled_ = 0;
  bool tail_unsignalled_ = false; // the latest request posted asked for no completion
  bool iwarp_ = false;
  bool signal_large_payloads_ = false;
  bool credit_limited_ = false;
  std::uint32_t peer_posted_ = 0; // the peer's receives posted, as last reported
  std::uint32_t taken_ = 0;       // requests posted that took one (modulo 2^32)
};

} // namespace asio_rdma::detail
