// Posting the library's own continuations (a receive's delivery, a completion that may not
// run inside its initiating function, the doorbell of sends queued in one turn) with no
// heap allocation in steady state.
//
// asio::post through an any_io_executor takes two blocks of Asio's per-thread recycling
// cache (the type-erased function and the scheduler's operation). That cache keeps two
// blocks per purpose, and a coroutine's pending operations already hold them, so in a
// ping-pong it missed on every round trip and called aligned_alloc twice (counted by
// test/common/allocation_counter.cpp's aligned_alloc). Here the executor's io_context is
// used directly, with an allocator: one block per post, from a per-thread cache of the
// library's own. Other executors (a strand, a thread pool's) take asio::post's path.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution/allocator.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/require.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace asio_rdma::detail {

/// The blocks of one thread's posted continuations, kept for the next ones: as many as
/// were ever in flight at once (a wave of datagram sends completed inside their
/// initiating calls posts one per send), up to `capacity`.
class posted_block_cache {
public:
  /// The largest posted operation of the library (the scheduler's header, a handler that
  /// keeps an executor of its own, its results); larger ones come from the heap.
  static constexpr std::size_t block_size = 192;

  static posted_block_cache& here() noexcept {
    thread_local posted_block_cache cache;
    return cache;
  }

  void* take() {
    if (count_ > 0)
      return blocks_[--count_];
    return ::operator new(block_size);
  }
  void give(void* block) noexcept {
    if (alive_ && count_ < capacity)
      blocks_[count_++] = block;
    else
      ::operator delete(block);
  }

  ~posted_block_cache() {
    alive_ = false; // a block given back later (at the thread's end) is freed
    while (count_ > 0)
      ::operator delete(blocks_[--count_]);
  }

private:
  static constexpr std::size_t capacity = 1024; // 192 KiB at most, per thread
  void* blocks_[capacity];
  std::size_t count_ = 0;
  bool alive_ = true;
};

template <typename T> struct posted_allocator {
  using value_type = T;
  posted_allocator() noexcept = default;
  template <typename U> posted_allocator(const posted_allocator<U>&) noexcept {}

  static constexpr bool fits(std::size_t n) noexcept {
    return n * sizeof(T) <= posted_block_cache::block_size &&
           alignof(T) <= alignof(std::max_align_t);
  }
  T* allocate(std::size_t n) {
    if (fits(n))
      return static_cast<T*>(posted_block_cache::here().take());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (fits(n))
      posted_block_cache::here().give(p);
    else
      std::allocator<T>().deallocate(p, n);
  }
  template <typename U> bool operator==(const posted_allocator<U>&) const noexcept { return true; }
};

/// As asio::post(ex, f): `f` runs on `ex`, never inside this call, and counts as work of
/// the io_context until it has run. `f` is called with no argument.
template <typename Function>
void post_continuation(const boost::asio::any_io_executor& ex, Function&& f) {
  namespace execution = boost::asio::execution;
  using io_executor = boost::asio::io_context::executor_type;
  using io_tracked = boost::asio::io_context::basic_executor_type<std::allocator<void>, 4>;
  auto on_io = [&](const auto& io) {
    boost::asio::require(io, execution::blocking.never,
                         execution::allocator(posted_allocator<void>()))
        .execute(std::forward<Function>(f));
  };
  if (const auto* io = ex.target<io_executor>())
    return on_io(*io);
  if (const auto* io = ex.target<io_tracked>()) // outstanding_work.tracked
    return on_io(*io);
  boost::asio::post(ex, std::forward<Function>(f));
}

} // namespace asio_rdma::detail
