// A watchdog for the waits of one file transfer connection: armed before
// each wait, it closes the connection when the wait lasts longer than the
// timeout, which completes the pending operation (operation_aborted), and
// remembers that it did so the caller reports asio::error::timed_out.
//
// Re-arming only moves a time point: the timer is waited on again only when
// it fires, so the data path costs no allocation per chunk.
#pragma once

#include <asio_rdma/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <time.h>

#include <chrono>
#include <memory>

namespace asio_rdma::detail {

/// The completion token of a transfer's waits: the error comes back as a value the
/// coroutine looks at (a timeout, a closed peer), not as an exception.
inline constexpr auto as_awaitable_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

class deadline {
public:
  deadline(const boost::asio::any_io_executor& ex, connection& conn,
           std::chrono::milliseconds timeout)
      : state_(std::make_shared<state>(ex, conn, timeout)) {}
  deadline(const deadline&) = delete;
  deadline& operator=(const deadline&) = delete;
  ~deadline() {
    state_->conn = nullptr;
    state_->armed = false;
    state_->timer.cancel();
  }

  /// The next `timeout` from now is allowed for the wait that follows.
  void arm() {
    auto& s = *state_;
    s.at = coarse_now() + s.timeout;
    s.armed = true;
    if (!s.waiting)
      wait(state_);
  }
  /// No wait is in progress.
  void disarm() noexcept { state_->armed = false; }
  /// True once the watchdog closed the connection.
  bool expired() const noexcept { return state_->expired; }

private:
  /// steady_clock's time to within a scheduler tick, read without a system
  /// call (CLOCK_MONOTONIC_COARSE is in the vDSO whatever the clock source;
  /// the precise clock is a system call on some, e.g. virtual machines).
  /// Armed once per message: precision is not needed for a timeout.
  static std::chrono::steady_clock::time_point coarse_now() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
  }

  struct state {
    state(const boost::asio::any_io_executor& ex, connection& c, std::chrono::milliseconds t)
        : timer(ex), conn(&c), timeout(t) {}
    boost::asio::steady_timer timer;
    connection* conn;
    std::chrono::milliseconds timeout;
    std::chrono::steady_clock::time_point at;
    bool armed = false;
    bool waiting = false;
    bool expired = false;
  };

  static void wait(const std::shared_ptr<state>& s) {
    s->waiting = true;
    s->timer.expires_at(s->at);
    s->timer.async_wait([s](error_code) {
      s->waiting = false;
      if (!s->armed || !s->conn)
        return;
      if (std::chrono::steady_clock::now() < s->at)
        return wait(s);
      s->expired = true;
      s->armed = false;
      s->conn->close();
    });
  }

  std::shared_ptr<state> state_;
};

} // namespace asio_rdma::detail
