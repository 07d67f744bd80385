// Keepalive's decision (connection_options::keepalive_interval, keepalive_count): once
// per interval, is the peer still there? Any completion proves it alive; a silent
// interval sends one probe; keepalive_count silent intervals in a row give up. No timer
// and no verbs call: the connection arms the timer and posts the probe, and
// test/unit/rc/keepalive_monitor_test.cpp drives the decision without a device.
#pragma once

#include <cstdint>

namespace asio_rdma::detail {

class keepalive_monitor {
public:
  enum class verdict : std::uint8_t {
    keep_waiting, // the peer answered, or a probe is already on its way
    send_probe,   // silent and idle: post one probe (a zero-length RDMA write)
    peer_lost,    // give_up_after silent intervals in a row: close with timed_out
  };

  explicit keepalive_monitor(std::uint32_t give_up_after) noexcept
      : give_up_after_(give_up_after) {}

  /// One interval has passed. `completions` is the connection's running count of
  /// completions (its send and receive work); `posted` its sends posted and not yet
  /// completed, the probe included.
  verdict tick(std::uint32_t completions, std::uint32_t posted) noexcept {
    // Posted user work is bounded by the transport's retries; while it waits, a living
    // but slow receiver may hold it by RNR for as long as it likes.
    const bool user_work_posted = posted > (probe_outstanding_ ? 1u : 0u);
    if (completions != completions_at_last_tick_ || user_work_posted)
      silent_intervals_ = 0;
    else if (++silent_intervals_ >= give_up_after_)
      return verdict::peer_lost;
    completions_at_last_tick_ = completions;
    if (silent_intervals_ > 0 && !probe_outstanding_ && posted == 0) {
      probe_outstanding_ = true;
      return verdict::send_probe;
    }
    return verdict::keep_waiting;
  }

  /// The probe completed (either way: its completion counts as activity already).
  void probe_finished() noexcept { probe_outstanding_ = false; }

  std::uint32_t silent_intervals() const noexcept { return silent_intervals_; }

private:
  std::uint32_t give_up_after_;
  std::uint32_t completions_at_last_tick_ = 0;
  std::uint32_t silent_intervals_ = 0;
  bool probe_outstanding_ = false;
};

} // namespace asio_rdma::detail
