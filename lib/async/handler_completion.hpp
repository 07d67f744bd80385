// Delivering a type-erased completion handler its result on the handler's associated executor
// (used by every operation body in lib/), and storing one (assign_handler).
//
// Not through asio::append: in Boost 1.81 an lvalue any_completion_handler used as a completion
// token wraps itself recursively (fixed in 1.82), so the handler is moved into a lambda.
#pragma once

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <utility>

namespace asio_rdma::detail {

/// Moves `source` into `target`. Use this instead of `target = std::move(source)`:
/// Boost 1.81's any_completion_handler move assignment constructs from an
/// lvalue, which its converting constructor wraps in itself without end.
template <typename... Signatures>
void assign_handler(boost::asio::any_completion_handler<Signatures...>& target,
                    boost::asio::any_completion_handler<Signatures...>&& source) noexcept {
  boost::asio::any_completion_handler<Signatures...> taken(std::move(source));
  target.swap(taken);
}

/// The handler's associated executor (default `io`), tracking outstanding work until the
/// handler has run.
template <typename Signature>
boost::asio::any_completion_executor
tracked_executor(const boost::asio::any_completion_handler<Signature>& handler,
                 const boost::asio::any_io_executor& io) {
  return boost::asio::prefer(boost::asio::get_associated_executor(handler, io),
                             boost::asio::execution::outstanding_work.tracked);
}

/// Runs handler(args...) on `work` now if the caller already runs there, else queues it.
template <typename Signature, typename... Args>
void dispatch_completion(const boost::asio::any_completion_executor& work,
                         boost::asio::any_completion_handler<Signature> handler, Args... args) {
  boost::asio::dispatch(work, [handler = std::move(handler), ... args = std::move(args)]() mutable {
    std::move(handler)(std::move(args)...);
  });
}

/// Runs handler(args...) on its associated executor, never from inside the caller: first
/// through `io` (a post), then on the handler's executor.
template <typename Signature, typename... Args>
void post_completion(const boost::asio::any_io_executor& io,
                     boost::asio::any_completion_handler<Signature> handler, Args... args) {
  auto work = tracked_executor(handler, io);
  boost::asio::post(io, [work = std::move(work), handler = std::move(handler),
                         ... args = std::move(args)]() mutable {
    dispatch_completion(work, std::move(handler), std::move(args)...);
  });
}

/// The handler's result, now if the caller runs on the handler's executor, else queued there.
/// (Connections call handlers that run on their own executor directly instead: building the
/// type-erased executor here costs a heap allocation.)
template <typename Signature, typename... Args>
void dispatch_handler(const boost::asio::any_io_executor& io,
                      boost::asio::any_completion_handler<Signature> handler, Args... args) {
  auto work = tracked_executor(handler, io);
  dispatch_completion(work, std::move(handler), std::move(args)...);
}

/// The handler's result, never from inside the caller (initiating functions, close()).
template <typename Signature, typename... Args>
void post_handler(const boost::asio::any_io_executor& io,
                  boost::asio::any_completion_handler<Signature> handler, Args... args) {
  post_completion(io, std::move(handler), std::move(args)...);
}

/// The handler's result on the completion path: called now when `direct` (the
/// caller already runs on the handler's executor), queued when `defer`, else
/// dispatched. The one place the completion path decides how a handler runs.
template <typename Signature, typename... Args>
void invoke_handler(const boost::asio::any_io_executor& io,
                    boost::asio::any_completion_handler<Signature> handler, bool direct, bool defer,
                    Args... args) {
  if (direct)
    std::move(handler)(std::move(args)...);
  else if (defer)
    post_handler(io, std::move(handler), std::move(args)...);
  else
    dispatch_handler(io, std::move(handler), std::move(args)...);
}

} // namespace asio_rdma::detail
