// asio-rdma: a pool of equal-sized buffers in one registered memory region.
#pragma once

#include <asio_rdma/memory_region.hpp>

#include <cstddef>
#include <cstdint>
#include <algorithm>
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
/// must outlive its leases, and a lease must outlive the operations that use
/// its buffer.
class buffer_pool {
public:
  class lease;

  /// `count` buffers of `buffer_size` bytes each, registered on the
  /// connection's device with `flags`. Throws boost::system::system_error.
  buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count, access flags);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count, access flags,
              error_code& ec);
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  buffer_pool(buffer_pool&&) noexcept = default;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  buffer_pool& operator=(buffer_pool&&) noexcept = default;

  /// A free buffer, or nothing if all are leased.
  std::optional<lease> try_acquire() noexcept;

  /// The size of each buffer in bytes.
  std::size_t buffer_size() const noexcept { return buffer_size_; }
  /// The number of buffers in the pool.
  std::size_t capacity() const noexcept { return free_.capacity(); }
  /// The number of buffers not leased now.
  std::size_t available() const noexcept { return free_.size(); }
  /// The one memory region all buffers are slices of.
  const memory_region& region() const noexcept { return region_; }

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
      return pool_->region_.data().subspan(index_ * pool_->buffer_size_, pool_->buffer_size_);
    }
    /// The first `length` bytes (default: all) as a local buffer for operations.
    local_buffer local(std::size_t length = memory_region::npos) const noexcept {
      return pool_->region_.slice(index_ * pool_->buffer_size_,
                                  std::min(length, pool_->buffer_size_));
    }
    /// The buffer as the peer addresses it (if registered with remote access).
    remote_buffer remote() const noexcept {
      return pool_->region_.remote(index_ * pool_->buffer_size_, pool_->buffer_size_);
    }
    /// Returns the buffer to the pool now.
    void release() noexcept {
      if (pool_)
        pool_->free_.push_back(index_);
      pool_ = nullptr;
    }

  private:
    friend class buffer_pool;
    lease(buffer_pool* pool, std::size_t index) noexcept : pool_(pool), index_(index) {}
    buffer_pool* pool_;
    std::size_t index_;
  };

private:
  memory_region region_;
  std::size_t buffer_size_ = 0;
  std::vector<std::size_t> free_;
};

} // namespace asio_rdma
