// An allocator that counts the blocks taken through it, for tests that bind it to a
// completion token or handler: what a handler's own memory costs (an
// any_completion_handler's block), apart from the rest of the process's allocations.
#pragma once

#include <cstddef>
#include <memory>

namespace asio_rdma::test {

template <typename T> struct block_counting_allocator {
  using value_type = T;
  std::size_t* blocks;
  explicit block_counting_allocator(std::size_t* b) noexcept : blocks(b) {}
  template <typename U>
  block_counting_allocator(const block_counting_allocator<U>& other) noexcept : blocks(other.blocks) {}
  T* allocate(std::size_t n) {
    ++*blocks;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  template <typename U> bool operator==(const block_counting_allocator<U>& o) const noexcept {
    return blocks == o.blocks;
  }
};

} // namespace asio_rdma::test
