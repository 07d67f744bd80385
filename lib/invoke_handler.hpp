// Running a type-erased completion handler with its results, on the
// handler's associated executor (the I/O executor when it has none).
//
// asio::append cannot be used with any_completion_handler in Boost 1.81: the
// lvalue it forwards matches any_completion_handler's converting constructor,
// which wraps the handler in itself without end. A lambda owning the handler,
// bound to the handler's executor, does the same job.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <tuple>
#include <utility>

namespace asio_rdma::detail {

template <typename Handler, typename... Args>
auto bind_results(const boost::asio::any_io_executor& io_ex, Handler&& handler, Args&&... args) {
  auto ex = boost::asio::get_associated_executor(handler, io_ex);
  return boost::asio::bind_executor(
      std::move(ex), [h = std::move(handler), results = std::make_tuple(std::forward<Args>(args)...)]() mutable {
        std::apply([&](auto&... a) { std::move(h)(std::move(a)...); }, results);
      });
}

/// Runs the handler now if the current thread runs its executor, else queues it.
template <typename Handler, typename... Args>
void dispatch_handler(const boost::asio::any_io_executor& io_ex, Handler&& handler,
                      Args&&... args) {
  boost::asio::dispatch(io_ex, bind_results(io_ex, std::move(handler), std::forward<Args>(args)...));
}

/// Queues the handler; never runs it inside the caller (initiating functions).
template <typename Handler, typename... Args>
void post_handler(const boost::asio::any_io_executor& io_ex, Handler&& handler, Args&&... args) {
  boost::asio::post(io_ex, bind_results(io_ex, std::move(handler), std::forward<Args>(args)...));
}

} // namespace asio_rdma::detail
