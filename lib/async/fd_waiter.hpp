// Waits for a file descriptor (an rdma_cm event channel, a completion channel, a raw
// socket) to become readable, or writable, on the user's io_context, but only while
// somebody needs it ("interest"): completions while a user operation is
// pending, CM events while a connection is open or being set up. A closed
// connection therefore leaves no work in the io_context, and an open but idle
// one only its CM wait. Events that arrive meanwhile stay in the kernel until
// the next wait. Writable waits are for the raw socket's packet backend, which waits
// for both directions on one fd (Asio's reactor takes an fd once, so one waiter).
#pragma once

#include "asio_alias.hpp"
#include "async/object_pool.hpp"

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cstddef>
#include <memory>

namespace asio_rdma::detail {

// The one shape of a callback in the layers below the I/O objects: a function pointer and
// its context. No std::function, no virtual call, no allocation: the fd waiter's "readable"
// and the completion queue's "batch done" are both this. (A work request's completion
// target is the same idea with the target as its own context: verbs/completion.hpp.)
struct callback {
  void (*function)(void* context) = nullptr;
  void* context = nullptr;

  explicit operator bool() const noexcept { return function != nullptr; }
  void operator()() const { function(context); }
};

class fd_waiter {
public:
  enum direction { read = 0, write = 1 };

  /// Calls `on_readable` (`on_writable`) each time the fd is readable (writable) while
  /// interest in that direction is declared. The callbacks' context must outlive the
  /// waiter (it is usually the waiter's owner) and keep itself alive while it runs if
  /// what it calls may destroy it.
  fd_waiter(const boost::asio::any_io_executor& ex, int fd, callback on_readable,
            callback on_writable = {})
      : descriptor_(ex, fd), sides_{{on_readable}, {on_writable}} {}
  /// Releases (does not close) the fd, cancelling the pending wait, whose handler then
  /// finds the waiter gone and does nothing.
  ~fd_waiter() {
    state_->alive = false;
    descriptor_.release();
  }
  fd_waiter(const fd_waiter&) = delete;
  fd_waiter& operator=(const fd_waiter&) = delete;

  void add_interest(direction d = read) {
    if (sides_[d].interest++ == 0)
      d == read ? arm<read>() : arm<write>();
  }
  void remove_interest(direction d = read) {
    if (--sides_[d].interest == 0 && sides_[d].armed) {
      // Cancels the other direction's wait too, which re-arms itself if still wanted.
      error_code ignored;
      descriptor_.cancel(ignored);
    }
  }
  /// Stops waiting for good (the owner is being torn down).
  void stop() {
    stopped_ = true;
    error_code ignored;
    descriptor_.cancel(ignored);
  }

private:
  /// Bytes for Asio's reactor wait operation (enough with Boost 1.81: callgrind sees no
  /// malloc per wake-up; a larger one would go to the heap, still correct).
  static constexpr std::size_t wait_memory = 256;
  /// What the pending wait shares with the waiter: whether the waiter still exists, and
  /// the memory of the wait's reactor operation (one; the rare second wait at a time, a
  /// write beside a read, goes to the heap. See async/object_pool.hpp; callgrind:
  /// about 150 instructions a round trip less than malloc and free on every wake-up). The
  /// handler keeps the state alive: Asio frees an operation's memory after moving the
  /// handler out of it, also when the io_context is destroyed with the wait pending.
  struct wait_state {
    bool alive = true;
    handler_block<wait_memory> memory;
  };
  using wait_allocator = handler_block_allocator<void, wait_memory>;

  /// One direction's callback and state.
  struct side {
    callback on_ready;
    int interest = 0;
    bool armed = false;
  };

  // The direction is a template argument, so the wait handler that runs on every
  // wake-up indexes nothing at run time (the read side costs what a read-only waiter
  // would).
  template <direction D> void arm() { arm<D>(state_); }
  // `state`: the waiter's, handed on from wait to wait (a wake-up copies no shared_ptr).
  template <direction D> void arm(std::shared_ptr<wait_state> state) {
    side& s = sides_[D];
    if (s.armed || s.interest == 0 || stopped_)
      return;
    s.armed = true;
    constexpr auto type = D == read ? boost::asio::posix::stream_descriptor::wait_read
                                    : boost::asio::posix::stream_descriptor::wait_write;
    const wait_allocator memory(&state->memory); // before `state` moves into the handler
    descriptor_.async_wait(
        type, boost::asio::bind_allocator(
                  memory, [this, state = std::move(state)](const error_code& ec) mutable {
                    if (!state->alive)
                      return; // cancelled by the destructor; `this` is gone
                    sides_[D].armed = false;
                    if (!ec && !stopped_)
                      sides_[D].on_ready();
                    if (state->alive)           // what on_ready ran may have destroyed us
                      arm<D>(std::move(state)); // if still wanted
                  }));
  }

  boost::asio::posix::stream_descriptor descriptor_;
  side sides_[2];
  /// Shared with the pending wait's handler.
  std::shared_ptr<wait_state> state_ = std::make_shared<wait_state>();
  bool stopped_ = false;
};

} // namespace asio_rdma::detail
