// A free list of reusable objects: grows on demand, never shrinks, so the
// steady state allocates nothing.
#pragma once

#include <cstddef>
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

/// An intrusive FIFO of objects linked through `T* next`.
template <typename T> class intrusive_queue {
public:
  bool empty() const noexcept { return !head_; }
  T* front() const noexcept { return head_; }
  void push(T* object) noexcept {
    object->next = nullptr;
    if (tail_)
      tail_->next = object;
    else
      head_ = object;
    tail_ = object;
  }
  T* pop() noexcept {
    T* object = head_;
    if (object) {
      head_ = object->next;
      if (!head_)
        tail_ = nullptr;
      object->next = nullptr;
    }
    return object;
  }
  /// Removes `object` if queued (O(n): only cancellation uses it).
  bool remove(T* object) noexcept {
    T* prev = nullptr;
    for (T* it = head_; it; prev = it, it = it->next) {
      if (it != object)
        continue;
      (prev ? prev->next : head_) = it->next;
      if (tail_ == it)
        tail_ = prev;
      it->next = nullptr;
      return true;
    }
    return false;
  }

  /// Unlinks the last `count` objects and passes each to `f`, in order.
  template <typename F> void drop_tail(std::size_t count, F&& f) {
    std::size_t size = 0;
    for (T* it = head_; it; it = it->next)
      ++size;
    count = count < size ? count : size;
    T* prev = nullptr;
    T* it = head_;
    for (std::size_t i = 0; i < size - count; ++i, it = it->next)
      prev = it;
    (prev ? prev->next : head_) = nullptr;
    tail_ = prev;
    while (it) {
      T* next = it->next;
      it->next = nullptr;
      f(it);
      it = next;
    }
  }

private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

} // namespace asio_rdma::detail
