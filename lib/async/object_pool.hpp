// A free list of reusable objects: grows on demand, never shrinks, so the
// steady state allocates nothing; and the intrusive queue the data path keeps them in.
#pragma once

#include <boost/assert.hpp>
#include <boost/intrusive/list.hpp>

#include <algorithm>

#include <cstddef>
#include <iterator>
#include <memory>
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

} // namespace asio_rdma::detail
