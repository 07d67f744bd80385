// A completion handler that is a function and the owner of its memory block
// (async/object_pool.hpp): a stream's or an RPC connection's, whose block is a member
// of the object the handler holds.
#pragma once

#include "async/object_pool.hpp"

#include <cstddef>
#include <memory>
#include <utility>

namespace asio_rdma::detail {

/// A completion handler whose memory is `block`, a member of what `owner` keeps alive:
/// calls fn(owner.get(), args...) and hands the reference on, and parks it
/// (release_after_free) when destroyed without being called. For handlers that are a
/// function and an owner (a connection of the RPC layer, whose transport or call holds
/// the block); the stream's own continuations are written out in stream.cpp.
template <std::size_t Size, typename Owner, typename Fn> class block_handler {
public:
  using allocator_type = handler_block_allocator<void, Size>;

  block_handler(std::shared_ptr<Owner> owner, handler_block<Size>* block, Fn fn) noexcept
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
  handler_block<Size>* block_;
  Fn fn_;
};

} // namespace asio_rdma::detail
