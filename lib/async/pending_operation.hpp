// The library's one representation of an asynchronous operation's handler while the
// operation waits: every operation (connections, acceptor, datagrams, raw sockets, file
// transfer) keeps its handler in a pending_operation, installs its cancellation handler
// through on_cancel(), and completes through complete(), the one place that decides how a
// handler is invoked (as Asio's handler_work does).
//
// The handler is an any_completion_handler, so it lives in memory from the handler's own
// allocator (recycled by default: no heap allocation per operation in steady state) and
// keeps its executor, allocator and cancellation slot.
#pragma once

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace asio_rdma::detail {

/// How a completion reaches its handler.
enum class delivery : std::uint8_t {
  /// Called now: the caller runs on the handler's executor, on a completion path (never
  /// inside an initiating function). What Asio's own operations do; no executor is built.
  direct,
  /// Now if the caller already runs on the handler's executor, else queued there.
  dispatch,
  /// Never inside the caller: queued on the I/O executor, then run on the handler's
  /// executor (initiating functions, close(), cancellation).
  post,
};

template <typename Signature> class pending_operation;

template <typename... Args> class pending_operation<void(Args...)> {
public:
  using handler_type = boost::asio::any_completion_handler<void(Args...)>;

  pending_operation() noexcept = default;
  explicit pending_operation(handler_type handler) noexcept { start(std::move(handler)); }
  pending_operation(pending_operation&& other) noexcept {
    start(std::move(other.handler_));
    cancel_installed_ = std::exchange(other.cancel_installed_, false);
  }
  pending_operation& operator=(pending_operation&& other) noexcept {
    start(std::move(other.handler_));
    cancel_installed_ = std::exchange(other.cancel_installed_, false);
    return *this;
  }

  /// Takes `handler` as the one this operation completes. Not `handler_ = std::move(h)`:
  /// Boost 1.81's any_completion_handler move assignment constructs from an lvalue, which
  /// its converting constructor wraps in itself without end (fixed in 1.82).
  void start(handler_type&& handler) noexcept {
    handler_type taken(std::move(handler));
    handler_.swap(taken);
    cancel_installed_ = false;
  }

  /// Hands the handler on (to the operation that continues this one), unfinished. This
  /// operation's cancellation handler is removed: it would withdraw what is over.
  handler_type release() noexcept {
    ignore_cancel();
    handler_type handler(std::move(handler_));
    return handler;
  }

  /// True while a handler waits.
  explicit operator bool() const noexcept { return static_cast<bool>(handler_); }

  /// Installs `canceller` as the handler's cancellation handler, if the caller connected a
  /// cancellation slot. complete() removes it.
  template <typename Canceller> void on_cancel(Canceller&& canceller) {
    auto slot = boost::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) {
      slot.template emplace<std::decay_t<Canceller>>(std::forward<Canceller>(canceller));
      cancel_installed_ = true;
    }
  }

  /// Removes the cancellation handler: the operation can no longer be withdrawn (e.g. its
  /// work request is posted). Free when none was installed (an operation posted at once).
  void ignore_cancel() noexcept {
    if (!cancel_installed_)
      return;
    cancel_installed_ = false;
    boost::asio::get_associated_cancellation_slot(handler_).clear();
  }

  /// The handler's associated executor (default `io`), tracking outstanding work while it
  /// is kept: for operations whose wait is not itself work of that executor's.
  boost::asio::any_completion_executor tracked_executor(const boost::asio::any_io_executor& io) const {
    return tracked_executor(handler_, io);
  }

  /// Delivers the result: removes the cancellation handler, then invokes the handler as
  /// `how` says. The operation is empty afterwards and may start again at once (the handler
  /// may itself start the next one).
  /// The results are taken by reference and copied once, into the handler's call.
  template <typename... Results>
  void complete(const boost::asio::any_io_executor& io, delivery how, Results&&... results) {
    static_assert(sizeof...(Results) == sizeof...(Args));
    if (how != delivery::direct)
      return complete_through_executor(io, how, Args(std::forward<Results>(results))...);
    ignore_cancel();
    handler_type handler(std::move(handler_));
    std::move(handler)(std::forward<Results>(results)...);
  }

  /// As complete(), for an operation that kept `work` (its handler's executor, tracking
  /// outstanding work) while it waited: the handler is delivered there, `how` being
  /// dispatch or post, without building that executor again.
  void complete_on(const boost::asio::any_completion_executor& work,
                   const boost::asio::any_io_executor& io, delivery how, Args... args) {
    ignore_cancel();
    handler_type handler(std::move(handler_));
    if (how == delivery::post) {
      boost::asio::post(io, [work, handler = std::move(handler), ... args = std::move(args)]() mutable {
        dispatch_to(work, std::move(handler), std::move(args)...);
      });
      return;
    }
    dispatch_to(work, std::move(handler), std::move(args)...);
  }

private:
  // Out of line: inlined into complete(), building the executor and the posted function
  // would make the direct path (every completion of a coroutine or plain callback on the
  // connection's executor) save and restore the registers and stack they need.
  [[gnu::noinline]] void complete_through_executor(const boost::asio::any_io_executor& io,
                                                   delivery how, Args... args) {
    // The executor first: the handler is moved from when delivered.
    auto work = tracked_executor(handler_, io);
    complete_on(work, io, how, std::move(args)...);
  }

  static boost::asio::any_completion_executor tracked_executor(const handler_type& handler,
                                                               const boost::asio::any_io_executor& io) {
    return boost::asio::prefer(boost::asio::get_associated_executor(handler, candidate_of(io)),
                               boost::asio::execution::outstanding_work.tracked);
  }
  // The default executor as an any_completion_executor, built from the io_context's own
  // executor type when it is one: Boost 1.81's any_completion_handler converts its candidate
  // to any_completion_executor on every call, and from an any_io_executor that conversion
  // allocates (a shared_target_executor) on each completion that is not direct.
  static boost::asio::any_completion_executor candidate_of(const boost::asio::any_io_executor& io) {
    if (const auto* own = io.target<boost::asio::io_context::executor_type>())
      return boost::asio::any_completion_executor(*own);
    return boost::asio::any_completion_executor(io);
  }
  // Not through asio::append: in Boost 1.81 an any_completion_handler used as a completion
  // token wraps itself recursively (fixed in 1.82), so the handler is moved into a lambda.
  static void dispatch_to(const boost::asio::any_completion_executor& work, handler_type handler,
                          Args... args) {
    boost::asio::dispatch(work, [handler = std::move(handler), ... args = std::move(args)]() mutable {
      std::move(handler)(std::move(args)...);
    });
  }

  handler_type handler_;
  /// on_cancel() put a cancellation handler in the handler's slot, which is still there.
  bool cancel_installed_ = false;
};

template <typename Signature>
pending_operation(boost::asio::any_completion_handler<Signature>) -> pending_operation<Signature>;

/// Completes `handler`, which never waited (its operation failed at initiation, or had
/// nothing to wait for), as `how` says.
template <typename Signature, typename... Args>
void complete_now(const boost::asio::any_io_executor& io,
                  boost::asio::any_completion_handler<Signature> handler, delivery how,
                  Args&&... args) {
  pending_operation<Signature>(std::move(handler)).complete(io, how, std::forward<Args>(args)...);
}

} // namespace asio_rdma::detail
