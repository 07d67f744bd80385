// An asynchronous operation's handler from initiation to completion: the base of the
// library's named initiation objects (io_initiation), and pending_operation, the one
// representation of the handler while the operation waits.
//
// Every asynchronous operation passes async_initiate a named type (as Asio's
// initiate_async_send), not a lambda: the type says which operation it starts, and
// get_executor() gives the I/O object's executor to completion tokens and Asio features
// that ask an initiation for it. Every operation of every I/O object (connection,
// acceptor, connection request, datagram socket, raw socket, file sender and receiver) is
// started the same way: on an object that is not open, its initiation completes with
// closed() (posted: never inside the initiating function); otherwise it wraps the handler
// in a pending_operation (pending()), together with whether the handler runs on the I/O
// object's executor, and passes it to the operation's one `start_*` entry into lib/. The operation keeps it while it waits, installs its
// cancellation handler through on_cancel(), and completes it through complete(), saying
// only where it completes from: the pending_operation alone decides how the handler runs
// (as Asio's handler_work does). See docs/architecture.md, "Adding an operation".
//
// The handler is kept inside the pending_operation (inline_handler): a small handler that
// moves without throwing (a coroutine's, a lambda's, either bound to an allocator, an
// executor or a cancellation slot) takes no memory at all; a larger one is kept as an
// any_completion_handler, in memory from the handler's own allocator. Either way it keeps
// its executor, allocator and cancellation slot.
#pragma once

#include <asio_rdma/detail/handlers.hpp>
#include <asio_rdma/detail/inline_handler.hpp>
#include <asio_rdma/detail/posted_continuation.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
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

template <typename Signature> class pending_operation;

template <typename... Args> class pending_operation<void(Args...)> {
public:
  using handler_type = boost::asio::any_completion_handler<void(Args...)>;

  pending_operation() noexcept = default;

  /// The handler of an operation initiated on the I/O object whose executor is `io`.
  /// Whether the handler runs on `io` is decided here, once, on the handler's own type
  /// (where it costs a comparison; after type erasure it would build an executor).
  template <typename Handler>
    requires(!std::is_same_v<std::decay_t<Handler>, handler_type>)
  pending_operation(Handler&& handler, const boost::asio::any_io_executor& io)
      : pending_operation(decided{runs_on(handler, io)}, std::forward<Handler>(handler)) {}

  /// True if `handler` runs on the I/O executor `io` itself (a coroutine on the
  /// connection's io_context, or a callback without an executor of its own): its
  /// completion, which runs on `io`, may then call it directly, without type-erased
  /// executor layers (which cost a heap allocation each).
  template <typename Handler>
  static bool runs_on(const Handler& handler, const boost::asio::any_io_executor& io) {
    // A reference to `io` itself when the handler has no executor of its own (Asio hands
    // back the default it was given): no copy of the type-erased executor to make.
    const auto& ex = boost::asio::get_associated_executor(handler, io);
    if constexpr (std::is_same_v<std::decay_t<decltype(ex)>, boost::asio::any_io_executor>) {
      if (&ex == &io)
        return true;
      // Both type-erased, as a coroutine's and the connection's are: two io_context
      // executors compare as themselves, without any_executor's equality (a call
      // through its function table, which looks both targets up again).
      using io_executor = boost::asio::io_context::executor_type;
      if (const auto* mine = ex.template target<io_executor>())
        if (const auto* theirs = io.template target<io_executor>())
          return *mine == *theirs;
    }
    return ex == io;
  }

  /// A handler that comes already type-erased (one the library hands on): not known to
  /// run on the I/O executor, so a completion path dispatches it.
  explicit pending_operation(handler_type handler) noexcept : handler_(std::move(handler)) {}

  pending_operation(pending_operation&& other) noexcept { *this = std::move(other); }
  pending_operation& operator=(pending_operation&& other) noexcept {
    handler_ = std::move(other.handler_);
    on_io_ = other.on_io_;
    cancel_installed_ = std::exchange(other.cancel_installed_, false);
    return *this;
  }

  /// Hands the handler on (to the operation that continues this one), unfinished. This
  /// operation's cancellation handler is removed: it would withdraw what is over.
  handler_type release() noexcept {
    ignore_cancel();
    return std::move(handler_).into_any();
  }

  /// True while a handler waits.
  explicit operator bool() const noexcept { return static_cast<bool>(handler_); }

  /// Installs `canceller` as the handler's cancellation handler, if the caller connected a
  /// cancellation slot. complete() removes it.
  template <typename Canceller> void on_cancel(Canceller&& canceller) {
    auto slot = handler_.cancellation_slot();
    if (slot.is_connected()) {
      slot.template emplace<std::decay_t<Canceller>>(std::forward<Canceller>(canceller));
      cancel_installed_ = true;
    }
  }

  /// The handler's cancellation slot (not connected if the caller bound none): for an
  /// operation that waits on another one and hands its cancellation on to it (a stream's
  /// read waits on the connection's receive).
  boost::asio::cancellation_slot cancellation_slot() const noexcept {
    return handler_.cancellation_slot();
  }

  /// Removes the cancellation handler: the operation can no longer be withdrawn (e.g. its
  /// work request is posted). Free when none was installed (an operation posted at once).
  void ignore_cancel() noexcept {
    if (!cancel_installed_)
      return;
    cancel_installed_ = false;
    handler_.cancellation_slot().clear();
  }

  /// The handler's associated executor (default `io`), tracking outstanding work while it
  /// is kept: for operations whose wait is not itself work of that executor's.
  boost::asio::any_completion_executor tracked_executor(const boost::asio::any_io_executor& io) const {
    return tracked_executor(handler_, io);
  }

  /// Delivers the result, completing from `origin`: removes the cancellation handler, then
  /// runs the handler (see `from`). `io` is the I/O object's executor. The operation is
  /// empty afterwards and may start again at once (the handler may itself start the next
  /// one). The results are taken by reference and copied once, into the handler's call.
  template <typename... Results>
  void complete(const boost::asio::any_io_executor& io, from origin, Results&&... results) {
    static_assert(sizeof...(Results) == sizeof...(Args));
    if (origin != from::completion_path || !on_io_)
      return complete_through_executor(io, origin, Args(std::forward<Results>(results))...);
    ignore_cancel();
    std::move(handler_)(std::forward<Results>(results)...);
  }

  /// As complete(), for an operation that kept `work` (its handler's executor, tracking
  /// outstanding work) while it waited: the handler is delivered there (dispatched from a
  /// completion path, posted from a user's call) without building that executor again.
  void complete_on(const boost::asio::any_completion_executor& work,
                   const boost::asio::any_io_executor& io, from origin, Args... args) {
    ignore_cancel();
    kept_handler handler(std::move(handler_));
    if (origin == from::user_call) {
      work_posted = true;
      post_continuation(io, [work, handler = std::move(handler), ... args = std::move(args)]() mutable {
        dispatch_to(work, std::move(handler), std::move(args)...);
      });
      return;
    }
    dispatch_to(work, std::move(handler), std::move(args)...);
  }

private:
  // Whether the handler runs on the I/O executor, asked of its own type before it is kept.
  struct decided {
    bool on_io;
  };
  template <typename Handler>
  pending_operation(decided where, Handler&& handler)
      : handler_(std::forward<Handler>(handler)), on_io_(where.on_io) {}

  // Out of line: inlined into complete(), building the executor and the posted function
  // would make the direct path (every completion of a coroutine or plain callback on the
  // connection's executor) save and restore the registers and stack they need.
  [[gnu::noinline]] void complete_through_executor(const boost::asio::any_io_executor& io,
                                                   from origin, Args... args) {
    if (on_io_) {
      // From a user's call, for a handler that runs on the I/O executor: posted there
      // directly, with no type-erased executor to build and track (that cost ~400
      // instructions and a heap allocation per completion: a stream's every write). The
      // posted function keeps the io_context's work, as the executor would.
      ignore_cancel();
      work_posted = true;
      post_continuation(io, [handler = kept_handler(std::move(handler_)),
                             ... args = std::move(args)]() mutable {
        std::move(handler)(std::move(args)...);
      });
      return;
    }
    // The executor first: the handler is moved from when delivered.
    auto work = tracked_executor(handler_, io);
    complete_on(work, io, origin, std::move(args)...);
  }

  using kept_handler = inline_handler<void(Args...)>;

  static boost::asio::any_completion_executor tracked_executor(const kept_handler& handler,
                                                               const boost::asio::any_io_executor& io) {
    return boost::asio::prefer(handler.executor(candidate_of(io)),
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
  // Moved into a lambda, not through asio::append: the kept handler is no completion token.
  static void dispatch_to(const boost::asio::any_completion_executor& work, kept_handler handler,
                          Args... args) {
    boost::asio::dispatch(work, [handler = std::move(handler), ... args = std::move(args)]() mutable {
      std::move(handler)(std::move(args)...);
    });
  }

  kept_handler handler_;
  /// The handler runs on the I/O executor: a completion path may call it directly.
  bool on_io_ = false;
  /// on_cancel() put a cancellation handler in the handler's slot, which is still there.
  bool cancel_installed_ = false;
};

template <typename Signature>
pending_operation(boost::asio::any_completion_handler<Signature>) -> pending_operation<Signature>;

/// How an initiation holds its I/O object's executor.
enum class executor_held : std::uint8_t {
  /// By pointer into the I/O object: the object outlives its operations, and copying a
  /// type-erased executor per operation would cost the data path.
  by_pointer,
  /// By value: the executor is the caller's argument (async_connect), or an object's that
  /// the operation outlives (a connection request given away), which a deferred
  /// operation outlives.
  by_value,
};

/// An initiation with no I/O object of its own to carry (async_connect).
struct no_object {};

/// Carries the I/O object's implementation (a raw or shared pointer, or no_object) and
/// its executor.
template <typename Impl, executor_held Held = executor_held::by_pointer> class io_initiation {
public:
  using executor_type = boost::asio::any_io_executor;

  io_initiation(Impl impl, const executor_type& ex) noexcept
      : impl_(std::move(impl)), ex_(hold(ex)) {}
  explicit io_initiation(const executor_type& ex) noexcept
    requires std::is_same_v<Impl, no_object>
      : ex_(hold(ex)) {}

  /// The I/O object's executor (empty for an object that is not open).
  executor_type get_executor() const noexcept { return io(); }

protected:
  const executor_type& io() const noexcept {
    if constexpr (Held == executor_held::by_pointer)
      return *ex_;
    else
      return ex_;
  }

  /// `handler` as the pending operation that lib/ keeps, knowing whether it runs on the I/O
  /// executor. `Signature` is the one the operation completes with inside lib/.
  template <typename Signature, typename Handler>
  pending_operation<Signature> pending(Handler&& handler) const {
    return pending_operation<Signature>(std::forward<Handler>(handler), io());
  }

  /// Completes the operation of an object that is not open with `ec` and empty results,
  /// posted (see post_result).
  template <typename Handler, typename... Results>
  void closed(Handler&& handler, error_code ec, Results&&... results) const {
    post_result(io(), std::forward<Handler>(handler), ec, std::forward<Results>(results)...);
  }

  [[no_unique_address]] Impl impl_;

private:
  using stored_executor =
      std::conditional_t<Held == executor_held::by_pointer, const executor_type*, executor_type>;
  static stored_executor hold(const executor_type& ex) noexcept {
    if constexpr (Held == executor_held::by_pointer)
      return &ex;
    else
      return ex;
  }
  stored_executor ex_;
};

} // namespace asio_rdma::detail
