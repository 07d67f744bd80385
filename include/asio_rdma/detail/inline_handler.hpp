// A completion handler kept inside the object that waits for it, with no memory of its
// own: pending_operation's storage.
//
// An any_completion_handler takes a block from the handler's allocator for every
// operation (Asio's recycling cache by default), and a steady awaited ping-pong keeps
// four of them alive at once, more than that cache holds (test/integration:
// integration_promises). Almost every handler is small: a coroutine's is one pointer, a
// lambda a few references. Such a handler is kept here, in place, behind a table of the
// six things the library does with it; a larger one, or one whose move may throw (the
// library moves a waiting operation out of its record without failing), is kept as an
// any_completion_handler in the same place, as before.
#pragma once

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/read.hpp>  // detail::read_op (moves_without_throwing)
#include <boost/asio/write.hpp> // detail::write_op

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace asio_rdma::detail {

/// True if moving a T cannot throw. Asio's binders declare their moves without noexcept,
/// though they only move what they hold: they are looked through. An adapter of the
/// library's that holds a user's handler specializes this as well.
template <typename T> struct moves_without_throwing : std::is_nothrow_move_constructible<T> {};

template <typename T, typename Allocator>
struct moves_without_throwing<boost::asio::allocator_binder<T, Allocator>>
    : std::bool_constant<moves_without_throwing<T>::value &&
                         std::is_nothrow_move_constructible_v<Allocator>> {};

template <typename T, typename Executor>
struct moves_without_throwing<boost::asio::executor_binder<T, Executor>>
    : std::bool_constant<moves_without_throwing<T>::value &&
                         std::is_nothrow_move_constructible_v<Executor>> {};

template <typename T, typename Slot>
struct moves_without_throwing<boost::asio::cancellation_slot_binder<T, Slot>>
    : std::bool_constant<moves_without_throwing<T>::value &&
                         std::is_nothrow_move_constructible_v<Slot>> {};

// asio::async_read's and async_write's composed operations (a stream's reads and writes
// from a coroutine) move a reference to the stream, their buffers, their completion
// condition and the handler, but do not declare it noexcept either: looked through too.
template <typename Buffers, typename Condition, typename Handler>
inline constexpr bool composed_moves_without_throwing =
    moves_without_throwing<Handler>::value && std::is_nothrow_move_constructible_v<Buffers> &&
    std::is_nothrow_move_constructible_v<Condition>;

template <typename Stream, typename Buffers, typename Iterator, typename Condition, typename Handler>
struct moves_without_throwing<boost::asio::detail::read_op<Stream, Buffers, Iterator, Condition, Handler>>
    : std::bool_constant<composed_moves_without_throwing<Buffers, Condition, Handler>> {};

template <typename Stream, typename Buffers, typename Iterator, typename Condition, typename Handler>
struct moves_without_throwing<boost::asio::detail::write_op<Stream, Buffers, Iterator, Condition, Handler>>
    : std::bool_constant<composed_moves_without_throwing<Buffers, Condition, Handler>> {};

template <typename Signature> class inline_handler;

template <typename... Args> class inline_handler<void(Args...)> {
public:
  using any_handler = boost::asio::any_completion_handler<void(Args...)>;

  /// The bytes a handler may take to be kept in place (a coroutine's handler takes 8, a
  /// handler bound to an allocator and a cancellation slot about 24; asio::async_read's
  /// or async_write's operation around a coroutine, as a stream's reads and writes get
  /// it, 56: the stream, the buffer and the bytes so far, its cancellation state and the
  /// handler).
  static constexpr std::size_t capacity = 64;

  /// True if a Handler is kept in place; any other is kept as an any_completion_handler.
  template <typename Handler>
  static constexpr bool kept_in_place =
      sizeof(Handler) <= capacity && alignof(Handler) <= alignof(std::max_align_t) &&
      moves_without_throwing<Handler>::value;

  inline_handler() noexcept = default;

  template <typename Handler>
    requires(!std::is_same_v<std::decay_t<Handler>, inline_handler>)
  explicit inline_handler(Handler&& handler) {
    using kept = std::decay_t<Handler>;
    if constexpr (kept_in_place<kept>) {
      ::new (static_cast<void*>(bytes_)) kept(std::forward<Handler>(handler));
      table_ = &table_of<kept>;
    } else {
      ::new (static_cast<void*>(bytes_)) any_handler(std::forward<Handler>(handler));
      table_ = &table_of<any_handler>;
    }
  }

  inline_handler(inline_handler&& other) noexcept { take(other); }
  inline_handler& operator=(inline_handler&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  ~inline_handler() { reset(); }

  explicit operator bool() const noexcept { return table_ != nullptr; }

  /// Destroys the handler without calling it.
  void reset() noexcept {
    if (table_)
      std::exchange(table_, nullptr)->destroy(bytes_);
  }

  /// Calls the handler once. It is moved out of this object first, which is empty when
  /// the call begins: the handler may store the next one here.
  void operator()(Args... args) && {
    std::exchange(table_, nullptr)->call(bytes_, std::move(args)...);
  }

  /// The handler's cancellation slot (not connected when it has none).
  boost::asio::cancellation_slot cancellation_slot() const noexcept {
    return table_ ? table_->slot(bytes_) : boost::asio::cancellation_slot();
  }

  /// The handler's associated executor, `candidate` if it has none.
  boost::asio::any_completion_executor
  executor(const boost::asio::any_completion_executor& candidate) const {
    return table_->executor(bytes_, candidate);
  }

  /// The handler, type-erased (for code that hands it on as an any_completion_handler).
  any_handler into_any() && { return std::exchange(table_, nullptr)->into_any(bytes_); }

private:
  struct table {
    void (*relocate)(void* to, void* from) noexcept;
    void (*destroy)(void* handler) noexcept;
    void (*call)(void* handler, Args...);
    boost::asio::cancellation_slot (*slot)(const void* handler) noexcept;
    boost::asio::any_completion_executor (*executor)(const void* handler,
                                                     const boost::asio::any_completion_executor&);
    any_handler (*into_any)(void* handler);
  };

  template <typename Handler> static Handler& as(void* p) noexcept { return *static_cast<Handler*>(p); }
  template <typename Handler> static const Handler& as(const void* p) noexcept {
    return *static_cast<const Handler*>(p);
  }

  template <typename Handler>
  static constexpr table table_of{
      [](void* to, void* from) noexcept {
        ::new (to) Handler(std::move(as<Handler>(from)));
        as<Handler>(from).~Handler();
      },
      [](void* handler) noexcept { as<Handler>(handler).~Handler(); },
      [](void* handler, Args... args) {
        // Onto the stack and destroyed here before the call, as Asio's operations free
        // their memory before the upcall.
        Handler moved(std::move(as<Handler>(handler)));
        as<Handler>(handler).~Handler();
        std::move(moved)(std::move(args)...);
      },
      [](const void* handler) noexcept -> boost::asio::cancellation_slot {
        return boost::asio::get_associated_cancellation_slot(as<Handler>(handler));
      },
      [](const void* handler, const boost::asio::any_completion_executor& candidate)
          -> boost::asio::any_completion_executor {
        return boost::asio::get_associated_executor(as<Handler>(handler), candidate);
      },
      [](void* handler) -> any_handler {
        any_handler erased(std::move(as<Handler>(handler)));
        as<Handler>(handler).~Handler();
        return erased;
      },
  };

  void take(inline_handler& other) noexcept {
    if (other.table_) {
      other.table_->relocate(bytes_, other.bytes_);
      table_ = std::exchange(other.table_, nullptr);
    }
  }

  const table* table_ = nullptr;
  alignas(std::max_align_t) unsigned char bytes_[capacity];
};

} // namespace asio_rdma::detail
