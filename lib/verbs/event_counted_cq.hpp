// A completion queue with its count of unacknowledged completion events.
// ibv_destroy_cq blocks until every event taken from the CQ's channel is
// acknowledged, and each ibv_ack_cq_events takes a mutex inside libibverbs,
// so events are acknowledged in batches and always before destruction.
// Used by the connections' completion_queue and the raw socket's verbs backend.
#pragma once

#include "verbs/handles.hpp"
#include "verbs/verbs_error.hpp"

#include <utility>

namespace asio_rdma::detail {

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
    cq_.reset(::ibv_create_cq(context, entries, nullptr, channel, 0));
    return cq_ ? error_code() : from_errno();
  }

  ibv_cq* get() const noexcept { return cq_.get(); }

  /// Counts events taken with ibv_get_cq_event; acknowledges every ack_batch.
  void events_received(unsigned n = 1) noexcept {
    unacked_ += n;
    if (unacked_ >= ack_batch) {
      ::ibv_ack_cq_events(cq_.get(), unacked_);
      unacked_ = 0;
    }
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
