// The file transfer's operations are coroutines started with co_spawn; this makes the
// co_spawn completion of one complete the caller's type-erased handler.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/system/system_error.hpp>

#include <cerrno>
#include <exception>
#include <utility>

namespace asio_rdma::detail {

/// A co_spawn completion token that calls f(handler, exception, result) on the handler's
/// own executor, with the handler's cancellation slot connected to the coroutine (so the
/// caller's cancellation reaches it).
template <typename Handler, typename Function>
auto spawn_completion(const boost::asio::any_io_executor& ex, Handler& handler, Function f) {
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  auto handler_ex = boost::asio::get_associated_executor(handler, ex);
  return boost::asio::bind_cancellation_slot(
      slot, boost::asio::bind_executor(handler_ex, [h = std::move(handler), f = std::move(f)](
                                                       std::exception_ptr e, auto result) mutable {
        f(std::move(h), e, std::move(result));
      }));
}

/// The error a coroutine's exception stands for: a system_error's code, else ENOMEM
/// (only bad_alloc gets that far).
inline error_code exception_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& x) {
    return x.code();
  } catch (...) {
    return error_code(ENOMEM, boost::system::system_category());
  }
}

} // namespace asio_rdma::detail
