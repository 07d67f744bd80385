// The base of the library's named initiation objects. Every asynchronous operation passes
// async_initiate a named type (as Asio's initiate_async_send), not a lambda: the type says
// which operation it starts, and get_executor() gives the I/O object's executor to
// completion tokens and Asio features that ask an initiation for it.
//
// Every initiation does the same two things (docs/architecture.md, "Adding an
// operation"): on an object that is not open it completes with closed() (posted: never
// inside the initiating function); otherwise it calls the operation's one start_* entry
// into lib/ with the implementation, the operation's arguments and pending(handler).
#pragma once

#include <asio_rdma/detail/handlers.hpp>
#include <asio_rdma/detail/pending_operation.hpp>

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
  /// `handler` as the pending operation that lib/ keeps, knowing whether it runs on the I/O
  /// executor. `Signature` is the one the operation completes with inside lib/.
  template <typename Signature, typename Handler>
  pending_operation<Signature> pending(Handler&& handler) const {
    return pending_operation<Signature>(std::forward<Handler>(handler), *ex_);
  }

  /// Completes the operation of an object that is not open with `ec` and empty results,
  /// posted: to the object's executor while it has one (a closed object keeps it), then run
  /// on the handler's; for an object that never had one, to the handler's own executor.
  template <typename Handler, typename... Results>
  void closed(Handler&& handler, error_code ec, Results&&... results) const {
    if (*ex_)
      boost::asio::post(*ex_, boost::asio::append(std::forward<Handler>(handler), ec,
                                                  std::forward<Results>(results)...));
    else
      post_result(std::forward<Handler>(handler), ec, std::forward<Results>(results)...);
  }

  Impl impl_;
  const executor_type* ex_;
};

} // namespace asio_rdma::detail
