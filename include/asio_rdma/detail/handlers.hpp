// Type-erased completion handlers for the non-template operation bodies in
// lib/. any_completion_handler keeps the handler's executor, allocator and
// cancellation slot, and allocates through the handler's allocator (recycled
// by default), so an operation costs no heap allocation in steady state.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>

#include <cstddef>
#include <cstdint>

namespace asio_rdma {
class connection;
class connection_request;
} // namespace asio_rdma

namespace asio_rdma::detail {

using size_handler = boost::asio::any_completion_handler<void(error_code, std::size_t)>;
using void_handler = boost::asio::any_completion_handler<void(error_code)>;
using connection_handler = boost::asio::any_completion_handler<void(error_code, connection)>;
using request_handler = boost::asio::any_completion_handler<void(error_code, connection_request)>;

/// True if `handler` runs on the I/O executor `io` itself (a coroutine on the
/// connection's io_context, or a callback without an executor of its own):
/// its completion, which runs on `io`, may then call it directly, without
/// type-erased executor layers (which cost a heap allocation each).
template <typename Handler>
bool runs_on(const Handler& handler, const boost::asio::any_io_executor& io) {
  return boost::asio::get_associated_executor(handler, io) == io;
}

/// Completes an operation that has no I/O object to run on (e.g. on a
/// connection that is not open): posted to the handler's own associated
/// executor, never invoked inside the initiating function.
template <typename Handler, typename... Args> void post_result(Handler&& handler, Args&&... args) {
  boost::asio::post(
      boost::asio::append(std::forward<Handler>(handler), std::forward<Args>(args)...));
}

} // namespace asio_rdma::detail
