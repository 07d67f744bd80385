// asio-rdma: a pool of equal-sized buffers in one registered memory region.
#pragma once

#include <asio_rdma/memory_region.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace asio_rdma {

/// Equal-sized buffers carved from one memory_region, registered once, handed
/// out as leases that return to the pool when destroyed. Taking and returning
/// a lease allocates nothing and makes no system call.
///
/// Not thread-safe: use a pool from one io_context thread (or strand). The pool
/// (or the pool it was moved to) must outlive its leases, and a lease must
/// outlive the operations that use its buffer. Moving a pool keeps its leases
/// valid: they refer to the pool's state, which stays where it is.
class buffer_pool {
public:
  class lease;

  /// `count` buffers of `buffer_size` bytes each, registered on the
  /// connection's device with `flags`. Throws boost::system::system_error
  /// (asio::error::invalid_argument for a size or count of 0, or above 1 TiB in all).
  buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count, access flags);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count, access flags,
              error_code& ec);
  /// Move constructor: takes over the buffers (and the leases out on them) of
  /// the object moved from, which is left empty.
  buffer_pool(buffer_pool&&) noexcept = default;
  /// Move assignment: releases what this object holds (its leases must be
  /// gone), then takes over what the other one held, leases included.
  buffer_pool& operator=(buffer_pool&&) noexcept = default;

  /// A free buffer, or nothing if all are leased.
  std::optional<lease> try_acquire() noexcept;

  /// The size of each buffer in bytes (0 for an empty or moved-from pool).
  std::size_t buffer_size() const noexcept { return state_ ? state_->buffer_size : 0; }
  /// The number of buffers in the pool.
  std::size_t capacity() const noexcept { return state_ ? state_->free.capacity() : 0; }
  /// The number of buffers not leased now.
  std::size_t available() const noexcept { return state_ ? state_->free.size() : 0; }
  /// The one memory region all buffers are slices of. Precondition: the pool
  /// is not empty or moved from.
  const memory_region& region() const noexcept { return state_->region; }

private:
  // Held on the heap so that leases survive a move of the pool.
  struct state {
    memory_region region;
    std::size_t buffer_size = 0;
    std::vector<std::size_t> free;
  };

public:
  /// One buffer of the pool; returns itself to the pool when destroyed.
  class lease {
  public:
    /// Move constructor: takes over the resources of the object moved from, which is left empty.
    lease(lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), index_(other.index_) {}
    /// Move assignment: releases what this object holds, then takes over what the other one held.
    lease& operator=(lease&& other) noexcept {
      if (this != &other) {
        release();
        pool_ = std::exchange(other.pool_, nullptr);
        index_ = other.index_;
      }
      return *this;
    }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() { release(); }

    /// The leased buffer (buffer_size() bytes of the pool's region).
    std::span<std::byte> data() const noexcept {
      return pool_->region.data().subspan(index_ * pool_->buffer_size, pool_->buffer_size);
    }
    /// The first `length` bytes (default: all) as a local buffer for operations.
    local_buffer local(std::size_t length = memory_region::npos) const noexcept {
      return pool_->region.slice(index_ * pool_->buffer_size, std::min(length, pool_->buffer_size));
    }
    /// The buffer as the peer addresses it (if registered with remote access).
    remote_buffer remote() const noexcept {
      return pool_->region.remote(index_ * pool_->buffer_size, pool_->buffer_size);
    }
    /// Returns the buffer to the pool now.
    void release() noexcept {
      if (pool_)
        pool_->free.push_back(index_); // capacity reserved: never allocates
      pool_ = nullptr;
    }

  private:
    friend class buffer_pool;
    lease(state* pool, std::size_t index) noexcept : pool_(pool), index_(index) {}
    state* pool_;
    std::size_t index_;
  };

private:
  std::unique_ptr<state> state_;
};

} // namespace asio_rdma
