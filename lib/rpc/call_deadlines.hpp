// The deadlines of a connection's calls, on one timer (a client's calls, a server's
// running handlers). A timer per call cost every call a timer queue insertion and removal
// (each under the reactor's lock) and its operation's memory; with one timer, a call costs
// a comparison: the timer is armed for the earliest deadline only, and when it fires the
// owner looks at its calls, ends those that are due and arms it for the earliest of the
// rest. Calls with one deadline each come in deadline order, so the timer fires about
// once per deadline period, not once per call.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>

namespace asio_rdma::rpc::detail {

class call_deadlines {
public:
  using clock = std::chrono::steady_clock;

  explicit call_deadlines(const boost::asio::any_io_executor& ex) : timer_(ex) {}

  /// A call is due at `at`: the timer is armed for it unless it is armed for an earlier
  /// time. When it fires, owner->expire_calls(now) is called (unless the owner, of which
  /// this is a member, is gone; the owner befriends call_deadlines), which ends the calls
  /// that are due and watches each of the rest again.
  template <typename Owner> void watch(clock::time_point at, Owner* owner) {
    if (at >= armed_at_)
      return;
    armed_at_ = at;
    timer_.expires_at(at); // an earlier wait ends with operation_aborted, ignored
    // `this` is the owner's member: alive while the owner is.
    timer_.async_wait([this, weak = owner->weak_from_this()](const boost::system::error_code& ec) {
      if (ec)
        return;
      if (auto o = weak.lock()) {
        armed_at_ = clock::time_point::max();
        o->expire_calls(clock::now());
      }
    });
  }

  /// No call is watched any more (the connection is closed).
  void stop() noexcept {
    armed_at_ = clock::time_point::min(); // watch() arms nothing more
    timer_.cancel();
  }

private:
  boost::asio::steady_timer timer_;
  clock::time_point armed_at_ = clock::time_point::max();
};

} // namespace asio_rdma::rpc::detail
