// What every initiation needs of a handler before lib/ takes it (as a pending_operation):
// a posted completion for an object that is not open; and `from`, where an operation
// completes from (light enough for lib/'s verbs layer, which passes it with every
// completion, to include without the rest).
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>

#include <cstddef>
#include <cstdint>

namespace asio_rdma::detail {

/// Where an operation completes from: all a completing caller says. From it (and from
/// whether the handler runs on the I/O executor) the pending_operation decides how the
/// handler runs.
enum class from : std::uint8_t {
  /// The I/O object's own completion path: the library's handler of a completion queue's
  /// or event channel's readiness, or a delivery it posted, running on the I/O executor. A
  /// handler that runs on that executor is called directly, as Asio's own operations do
  /// (no executor is built); another is dispatched to its executor.
  completion_path,
  /// A user's call: an initiating function, close(), a cancellation, or a poll the user
  /// asked for. The handler never runs inside it: it is posted to the I/O executor, then
  /// run on its own.
  user_call,
};

/// Set on this thread when the library posts work that should run soon (a completion
/// from a user's call, a delivery, a deferred doorbell): a busy-polling completion queue
/// then ends its turn of polls at once, so that the posted work runs before the next
/// turn instead of after up to 256 empty polls (an awaited write on a stream waited about
/// 50 µs for it on SoftRoCE). Cleared by the completion queue when it yields. One flag
/// per thread, shared by the library and the program (default visibility, as Asio's own
/// per-thread state).
inline thread_local bool work_posted = false;

/// Completes an operation that never started (its object is not open) with `args`,
/// posted, never invoked inside the initiating function: to the I/O executor `io` while the
/// object has one (a closed object keeps it), then run on the handler's own; for an object
/// that never had one (`io` empty), to the handler's own associated executor.
template <typename Handler, typename... Args>
void post_result(const boost::asio::any_io_executor& io, Handler&& handler, Args&&... args) {
  if (io)
    boost::asio::post(io, boost::asio::append(std::forward<Handler>(handler),
                                              std::forward<Args>(args)...));
  else
    boost::asio::post(
        boost::asio::append(std::forward<Handler>(handler), std::forward<Args>(args)...));
}

} // namespace asio_rdma::detail
