// Counts the program's heap allocations (global operator new) while a counting_scope is
// alive. Link allocation_counter.cpp into a test to replace the global operator new; only
// tests that assert "no allocation" should, since it applies to the whole executable.
#pragma once

#include <cstddef>

namespace asio_rdma::test {

/// Heap allocations counted so far (every thread), since the program started counting.
std::size_t allocations() noexcept;

/// Heap allocations counted so far on the calling thread.
std::size_t thread_allocations() noexcept;

/// Counts aligned_alloc too (`on`; off at first): Asio's handler memory, which its
/// recycling allocator takes from aligned_alloc when its per-thread cache (two blocks per
/// purpose) has none that fits. False if it cannot be counted in this build (sanitizers,
/// whose runtime owns aligned_alloc).
bool count_aligned_alloc(bool on) noexcept;

/// Whose allocations a counting_scope counts.
enum class counted_threads { all, this_thread };

/// Counts allocations from construction to destruction: of every thread, or only of the
/// thread that made the scope (a client's, while a server runs on another thread).
class counting_scope {
public:
  explicit counting_scope(counted_threads which = counted_threads::all) noexcept;
  ~counting_scope();
  counting_scope(const counting_scope&) = delete;
  counting_scope& operator=(const counting_scope&) = delete;
  /// Allocations since this scope began.
  std::size_t count() const noexcept {
    return (which_ == counted_threads::all ? allocations() : thread_allocations()) - start_;
  }

private:
  counted_threads which_;
  std::size_t start_;
};

} // namespace asio_rdma::test
