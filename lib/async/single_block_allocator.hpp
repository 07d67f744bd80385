// An allocator that hands out one block of memory kept by its owner, for an operation
// that runs one at a time (the fd waiter's reactor wait): its memory then never comes
// from the heap nor from Asio's per-thread recycling cache, which holds two blocks, so
// that two other handlers alive at the same time (a send's and a receive's) still fit in
// that cache. A request that does not fit, or comes while the block is taken, goes to the
// heap: correct, only slower.
#pragma once

#include <cstddef>
#include <memory>

namespace asio_rdma::detail {

template <std::size_t Size> struct single_block {
  bool in_use = false;
  alignas(std::max_align_t) std::byte bytes[Size];
};

template <typename T, std::size_t Size> struct single_block_allocator {
  using value_type = T;
  template <typename U> struct rebind { using other = single_block_allocator<U, Size>; };

  single_block<Size>* block;

  explicit single_block_allocator(single_block<Size>* b) noexcept : block(b) {}
  template <typename U>
  single_block_allocator(const single_block_allocator<U, Size>& other) noexcept
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
  }
  template <typename U>
  bool operator==(const single_block_allocator<U, Size>& other) const noexcept {
    return block == other.block;
  }
};

} // namespace asio_rdma::detail
