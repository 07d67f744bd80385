// The memory the data path reuses, so that its steady state allocates nothing: a free
// list of reusable objects (grows on demand, never shrinks), the intrusive queue the data
// path keeps them in, and handler blocks (the memory of a handler that runs one at a
// time).
#pragma once

#include <boost/assert.hpp>
#include <boost/intrusive/list.hpp>

#include <algorithm>

#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

namespace asio_rdma::detail {

/// T must have a `T* next` member, used as the free-list link.
template <typename T> class object_pool {
public:
  T* get() {
    if (!free_)
      return grow();
    T* object = free_;
    free_ = object->next;
    object->next = nullptr;
    return object;
  }
  void put(T* object) noexcept {
    object->next = free_;
    free_ = object;
  }

private:
  // Out of line: inlined, the allocation's code would make every get() save and restore
  // the registers it needs (a dozen instructions on the data path, which reuses objects).
  [[gnu::noinline]] T* grow() {
    storage_.push_back(std::make_unique<T>());
    return storage_.back().get();
  }

  std::vector<std::unique_ptr<T>> storage_;
  T* free_ = nullptr;
};

/// What an object needs to wait in an intrusive_queue (in one at a time). Normal links:
/// no unlinking on destruction, no state kept for is_linked(); a queue's owner knows
/// which queue an object is in (an operation's kind and `posted` say it).
using queue_hook =
    boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>>;

/// A first-in first-out queue of objects derived from queue_hook (Boost.Intrusive's
/// list): no allocation, O(1) push, pop and remove. Pointers in, pointers out (null when
/// empty), as the data path uses it.
template <typename T> class intrusive_queue {
public:
  bool empty() const noexcept { return list_.empty(); }
  T* front() noexcept { return list_.empty() ? nullptr : &list_.front(); }
  void push(T* object) noexcept { list_.push_back(*object); }
  void push_front(T* object) noexcept { list_.push_front(*object); }
  T* pop() noexcept {
    if (list_.empty())
      return nullptr;
    T* object = &list_.front();
    list_.pop_front();
    return object;
  }
  /// The object queued after `object` (which is in this queue), or null.
  T* after(T* object) noexcept {
    auto it = std::next(list_.iterator_to(*object));
    return it == list_.end() ? nullptr : &*it;
  }
  /// Removes `object`, which must be in this queue: a normal link keeps no state that
  /// could tell, so builds with assertions look for it (O(n), never in a release build).
  void remove(T* object) noexcept {
    BOOST_ASSERT_MSG(holds(object), "intrusive_queue::remove: not in this queue");
    list_.erase(list_.iterator_to(*object));
  }

  /// Unlinks the last `count` objects (all if fewer) and passes each to `f`, oldest first.
  template <typename F> void drop_tail(std::size_t count, F&& f) {
    auto it = list_.end();
    for (std::size_t i = 0; i < count && it != list_.begin(); ++i)
      --it;
    while (it != list_.end()) {
      T* object = &*it;
      it = list_.erase(it);
      f(object);
    }
  }

private:
  bool holds(const T* object) const noexcept {
    return std::any_of(list_.begin(), list_.end(), [object](const T& o) { return &o == object; });
  }

  boost::intrusive::list<T, boost::intrusive::base_hook<queue_hook>,
                         boost::intrusive::constant_time_size<false>>
      list_;
};

// The memory of a handler that runs one at a time: one block kept by its owner (the fd
// waiter's reactor wait, each kind of a stream's or an RPC transport's operations), so
// that the handler never comes from the heap nor from Asio's per-thread recycling cache.
// That cache holds two blocks, so two other handlers alive at the same time (a send's and
// a receive's) still fit in it. A request that does not fit, or comes while the block is
// taken, goes to the heap: correct, only slower.
//
// A handler that holds the very object whose member its block is needs one more thing.
// Destroyed without being called (an io_context destroyed with the handler queued), Asio's
// any_completion_handler destroys the handler first and frees its memory after: the
// handler must not release the last reference to its owner then. It parks it in the block
// (release_after_free), and deallocate() releases it once the block is no longer touched.
// Only while the block is taken: a handler kept elsewhere (in place in its operation,
// detail/inline_handler.hpp, so never allocated) must release its owner itself, or
// nothing would (integration_stream's streams_whose_io_context_never_runs_again_are_freed).
// test/unit/async/fd_waiter_test.cpp covers the allocator.
template <std::size_t Size> struct handler_block {
  bool in_use = false;
  std::shared_ptr<void> owner_after_free; // see release_after_free
  alignas(std::max_align_t) std::byte bytes[Size];
};

/// For the destructor of a handler whose memory may be `block` and which holds `owner`, the
/// block's owner: if that is the last reference and the block is taken (the handler's
/// memory, or another's that deallocate() will free), it is released after that memory is
/// freed, not now. A handler not in the block (kept in place, or from the heap while
/// another held the block) lets its owner go at once: no deallocate() would come. A
/// handler that ran has handed its reference on.
template <std::size_t Size, typename T>
void release_after_free(handler_block<Size>* block, std::shared_ptr<T>& owner) noexcept {
  if (owner && owner.use_count() == 1 && block->in_use)
    block->owner_after_free = std::move(owner);
}

template <typename T, std::size_t Size> struct handler_block_allocator {
  using value_type = T;
  template <typename U> struct rebind { using other = handler_block_allocator<U, Size>; };

  handler_block<Size>* block;

  explicit handler_block_allocator(handler_block<Size>* b) noexcept : block(b) {}
  template <typename U>
  handler_block_allocator(const handler_block_allocator<U, Size>& other) noexcept
      : block(other.block) {}

  T* allocate(std::size_t n) {
    if (!block->in_use && n * sizeof(T) <= Size && alignof(T) <= alignof(std::max_align_t)) {
      block->in_use = true;
      return reinterpret_cast<T*>(block->bytes);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (reinterpret_cast<std::byte*>(p) == block->bytes)
      block->in_use = false;
    else
      std::allocator<T>().deallocate(p, n);
    if (block->owner_after_free) {
      auto last = std::move(block->owner_after_free); // may destroy the block: touch it no more
    }
  }
  template <typename U>
  bool operator==(const handler_block_allocator<U, Size>& other) const noexcept {
    return block == other.block;
  }
};

} // namespace asio_rdma::detail
