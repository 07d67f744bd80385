// The memory of a stream's handlers: one block per kind of operation, inside the stream,
// so that no handler of its data path comes from the heap (the RPC layer's connections
// and calls keep their handlers' memory the same way, through block_handler). Like async/fd_waiter.hpp's
// single_block, with one difference: a stream's handlers hold the stream itself, whose
// member the block is. Destroyed without being called (an io_context destroyed with the
// handler queued), Asio's any_completion_handler destroys the handler first and frees its
// memory after: the handler must not release the last reference to the stream then. It
// parks it in the block (release_after_free), and deallocate() releases it once the block
// is no longer touched.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace asio_rdma::detail {

template <std::size_t Size> struct stream_handler_block {
  bool in_use = false;
  std::shared_ptr<void> owner_after_free;
  alignas(std::max_align_t) std::byte bytes[Size];
};

/// For the destructor of a handler whose memory is `block` and which holds `owner`, the
/// block's owner: if that is the last reference, it is released after the handler's memory
/// is freed, not now. A handler that ran has handed its reference on.
template <std::size_t Size, typename T>
void release_after_free(stream_handler_block<Size>* block, std::shared_ptr<T>& owner) noexcept {
  if (owner && owner.use_count() == 1)
    block->owner_after_free = std::move(owner);
}

template <typename T, std::size_t Size> struct stream_handler_allocator {
  using value_type = T;
  template <typename U> struct rebind { using other = stream_handler_allocator<U, Size>; };

  stream_handler_block<Size>* block;

  explicit stream_handler_allocator(stream_handler_block<Size>* b) noexcept : block(b) {}
  template <typename U>
  stream_handler_allocator(const stream_handler_allocator<U, Size>& other) noexcept
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
  bool operator==(const stream_handler_allocator<U, Size>& other) const noexcept {
    return block == other.block;
  }
};

/// A completion handler whose memory is `block`, a member of what `owner` keeps alive:
/// calls fn(owner.get(), args...) and hands the reference on, and parks it
/// (release_after_free) when destroyed without being called. For handlers that are a
/// function and an owner (a connection of the RPC layer, whose transport or call holds
/// the block); the stream's own continuations are written out in stream.cpp.
template <std::size_t Size, typename Owner, typename Fn> class block_handler {
public:
  using allocator_type = stream_handler_allocator<void, Size>;

  block_handler(std::shared_ptr<Owner> owner, stream_handler_block<Size>* block, Fn fn) noexcept
      : owner_(std::move(owner)), block_(block), fn_(std::move(fn)) {}
  block_handler(block_handler&&) noexcept = default;
  block_handler& operator=(block_handler&&) = delete;
  ~block_handler() { release_after_free(block_, owner_); }

  allocator_type get_allocator() const noexcept { return allocator_type(block_); }

  template <typename... Args> void operator()(Args&&... args) {
    auto owner = std::move(owner_); // the block's owner lives until fn has run
    fn_(owner.get(), std::forward<Args>(args)...);
  }

private:
  std::shared_ptr<Owner> owner_;
  stream_handler_block<Size>* block_;
  Fn fn_;
};

} // namespace asio_rdma::detail
