// The base of the library's named initiation objects. Every asynchronous operation passes
// async_initiate a named type (as Asio's initiate_async_send), not a lambda: the type says
// which operation it starts, and get_executor() gives the I/O object's executor to
// completion tokens and Asio features that ask an initiation for it.
#pragma once

#include <asio_rdma/detail/handlers.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <utility>

namespace asio_rdma::detail {

/// Carries the I/O object's implementation (a raw or shared pointer) and its executor.
/// The executor is held by pointer: an I/O object outlives its operations, and copying a
/// type-erased executor per operation would cost the data path.
template <typename Impl> class io_initiation {
public:
  using executor_type = boost::asio::any_io_executor;

  io_initiation(Impl impl, const executor_type& ex) noexcept
      : impl_(std::move(impl)), ex_(&ex) {}

  /// The I/O object's executor (empty for an object that is not open).
  executor_type get_executor() const noexcept { return *ex_; }

protected:
  /// True if `handler` runs on the I/O executor itself: its completion may then call it
  /// directly (see runs_on).
  template <typename Handler> bool runs_on_io(const Handler& handler) const {
    return runs_on(handler, *ex_);
  }

  Impl impl_;
  const executor_type* ex_;
};

} // namespace asio_rdma::detail
