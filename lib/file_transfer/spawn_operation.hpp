// The file transfer's operations are written as coroutines. spawn_operation runs one with
// co_spawn and completes the caller's pending_operation with its outcome: the coroutine is
// how the operation is written, not how it completes (the pending_operation decides that,
// as for every other operation).
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/system_error.hpp>

#include <cerrno>
#include <exception>
#include <new>
#include <system_error>
#include <memory>
#include <utility>

namespace asio_rdma::detail {

/// The error a coroutine's exception stands for: a system_error's code (Boost's, or the
/// standard library's, as std::filesystem throws), ENOMEM for bad_alloc, and for anything
/// else (a defect in the library: nothing it calls throws another) ENOTRECOVERABLE, never
/// a made-up "out of memory".
inline error_code exception_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& x) {
    return x.code();
  } catch (const std::system_error& x) {
    // errno values keep their own category (Boost would wrap std's and renumber them).
    const std::error_code& c = x.code();
    if (c.category() == std::generic_category())
      return error_code(c.value(), boost::system::generic_category());
    if (c.category() == std::system_category())
      return error_code(c.value(), boost::system::system_category());
    return error_code(c);
  } catch (const std::bad_alloc&) {
    return error_code(ENOMEM, boost::system::system_category());
  } catch (...) {
    return error_code(ENOTRECOVERABLE, boost::system::system_category());
  }
}

/// Runs `body` on `ex`, then calls deliver(pending, exception, result), which completes
/// `pending` (from::completion_path). The caller's cancellation reaches the coroutine:
/// the operation's cancellation handler emits a signal bound to it.
template <typename Signature, typename Result, typename Deliver>
void spawn_operation(const boost::asio::any_io_executor& ex, boost::asio::awaitable<Result> body,
                     pending_operation<Signature>&& pending, Deliver deliver) {
  struct state {
    pending_operation<Signature> op;
    boost::asio::cancellation_signal signal;
  };
  auto s = std::make_shared<state>();
  s->op = std::move(pending);
  // A raw pointer: the cancellation handler lives in the caller's slot, which complete()
  // clears before the state goes (the completion below holds it until then).
  s->op.on_cancel([raw = s.get()](boost::asio::cancellation_type type) { raw->signal.emit(type); });
  auto& signal = s->signal;
  boost::asio::co_spawn(
      ex, std::move(body),
      boost::asio::bind_cancellation_slot(
          signal.slot(), [s = std::move(s), deliver = std::move(deliver)](std::exception_ptr e,
                                                                          Result result) mutable {
            deliver(s->op, e, std::move(result));
          }));
}

} // namespace asio_rdma::detail
