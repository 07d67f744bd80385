// Work completions at the verbs level: what a work completion's wr_id points to
// (completion_target), and the completion queue with its count of unacknowledged events
// (event_counted_cq), the library's one event model.
//
// Every posted work request carries the address of a completion_target; the completion
// queue calls its function pointer with where the completion was found (`from`: by the
// completion path, or by a poll a user's call made), so no target works that out again.
// No map, no virtual call, no std::function on this path.
#pragma once

#include "verbs/device.hpp"
#include "verbs/handles.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/detail/handlers.hpp>

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <utility>

namespace asio_rdma::detail {

struct completion_target {
  using function = void (*)(completion_target* self, const ibv_wc& wc, detail::from origin);
  function on_complete = nullptr;

  std::uint64_t wr_id() noexcept { return reinterpret_cast<std::uintptr_t>(this); }
  /// The target a work request's wr_id names.
  static completion_target* of(std::uint64_t wr_id) noexcept {
    return reinterpret_cast<completion_target*>(static_cast<std::uintptr_t>(wr_id));
  }
  static completion_target* of(const ibv_wc& wc) noexcept { return of(wc.wr_id); }
};

// event_counted_cq: a completion queue with its count of unacknowledged completion events.
// ibv_destroy_cq blocks until every event taken from the CQ's channel is
// acknowledged, and each ibv_ack_cq_events takes a mutex inside libibverbs,
// so events are acknowledged in batches and always before destruction.
// The library's one event model (arm, then take one event per wake-up) is here: used by
// the connections' completion_queue and the raw socket's verbs backend.
class event_counted_cq {
public:
  event_counted_cq() = default;
  event_counted_cq(event_counted_cq&& other) noexcept
      : cq_(std::move(other.cq_)), unacked_(std::exchange(other.unacked_, 0u)) {}
  event_counted_cq(const event_counted_cq&) = delete;
  event_counted_cq& operator=(const event_counted_cq&) = delete;
  ~event_counted_cq() { reset(); }

  /// Creates the CQ, its events going to `channel` (which must outlive it).
  error_code create(ibv_context* context, int entries, ibv_comp_channel* channel) noexcept {
    reset();
    errno = 0;
    cq_.reset(::ibv_create_cq(context, entries, nullptr, channel, 0));
    if (cq_)
      return {};
    if (errno != 0)
      return from_errno();
    return refused_without_errno(context,
                                 "a completion queue of " + std::to_string(entries) + " entries");
  }

  ibv_cq* get() const noexcept { return cq_.get(); }

  /// Asks for one event on the channel when the next completion arrives.
  error_code arm() noexcept {
    if (int rc = ::ibv_req_notify_cq(cq_.get(), 0))
      return from_returned_errno(rc);
    return {};
  }

  /// Takes one event from `channel` (non-blocking), counted for acknowledgement; false if
  /// there was none. One at most: the channel serves this CQ alone, and an armed CQ raises
  /// one event, then none until it is armed again. Reading until EAGAIN would cost a
  /// second system call per wake-up, on the critical path.
  bool take_event(ibv_comp_channel* channel) noexcept {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (::ibv_get_cq_event(channel, &cq, &context) != 0)
      return false;
    if (++unacked_ >= ack_batch) {
      ::ibv_ack_cq_events(cq_.get(), unacked_);
      unacked_ = 0;
    }
    return true;
  }

  /// Acknowledges what is pending and destroys the CQ.
  void reset() noexcept {
    if (cq_ && unacked_ > 0)
      ::ibv_ack_cq_events(cq_.get(), unacked_);
    unacked_ = 0;
    cq_.reset();
  }

private:
  static constexpr unsigned ack_batch = 64;
  cq_ptr cq_;
  unsigned unacked_ = 0;
};

} // namespace asio_rdma::detail
