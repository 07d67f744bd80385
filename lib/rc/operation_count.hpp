// The connection's count of pending user operations, and when the waits it needs must be
// brought up to date. A connection with a pending operation waits on its CM channel and
// its completion queue; one without leaves the io_context no work of its own, so
// io_context::run() can return (async/fd_waiter.hpp). No I/O: the connection adds and
// removes the waits when this says so; test/unit/rc/operation_count_test.cpp drives it
// without a device.
#pragma once

#include <cstdint>
#include <utility>

namespace asio_rdma::detail {

class operation_count {
public:
  /// An operation started. True if the waits must be brought up to date now: it is the
  /// only one, and the waits are not still held for an operation that finished earlier in
  /// the same completion batch.
  bool started() noexcept {
    if (count_++ != 0)
      return false;
    // The last one finished in this batch and the waits are still held: nothing changes.
    return !std::exchange(update_deferred_, false);
  }

  /// An operation finished. True if it was the last one: the waits must then be brought
  /// up to date, now or, inside a batch of the connection's own completion queue, when the
  /// batch ends (defer_update()).
  bool finished() noexcept { return count_ > 0 && --count_ == 0; }

  /// The last operation finished inside a batch of the connection's own completion queue,
  /// whose end calls batch_ended(). There a handler usually starts the next operation at
  /// once (a ping-pong), so the waits are kept until the batch ends instead of dropped and
  /// added again per operation.
  void defer_update() noexcept { update_deferred_ = true; }

  /// The completion batch ended: true if an update was deferred to now.
  bool batch_ended() noexcept { return std::exchange(update_deferred_, false); }

  /// The waits are being brought up to date (whatever was deferred is decided now).
  void updating() noexcept { update_deferred_ = false; }

  /// Some operation is pending: the waits are wanted.
  bool any() const noexcept { return count_ > 0; }

private:
  std::uint32_t count_ = 0;
  bool update_deferred_ = false;
};

} // namespace asio_rdma::detail
