// Counts the program's heap allocations (global operator new) while a counting_scope is
// alive. Link allocation_counter.cpp into a test to replace the global operator new; only
// tests that assert "no allocation" should, since it applies to the whole executable.
#pragma once

#include <cstddef>

namespace asio_rdma::test {

/// Heap allocations counted so far (every thread), since the program started counting.
std::size_t allocations() noexcept;

/// Counts allocations from construction to destruction.
class counting_scope {
public:
  counting_scope() noexcept;
  ~counting_scope();
  counting_scope(const counting_scope&) = delete;
  counting_scope& operator=(const counting_scope&) = delete;
  /// Allocations since this scope began.
  std::size_t count() const noexcept { return allocations() - start_; }

private:
  std::size_t start_;
};

} // namespace asio_rdma::test
