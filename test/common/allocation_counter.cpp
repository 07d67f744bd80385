// The global operator new and delete of a test that counts heap allocations
// (allocation_counter.hpp): malloc and free, plus a count while counting is on.
#include "allocation_counter.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::size_t> counted{0};
std::atomic<int> scopes{0};
thread_local bool tracing = false;
thread_local std::size_t counted_here = 0;

// With ASIO_RDMA_TEST_TRACE_ALLOCATIONS set, each counted allocation prints its stack to
// stderr (run the binary under llvm-symbolizer or addr2line to read it): how to find
// what allocated when a test says it should not have.
void count() {
  if (scopes.load(std::memory_order_relaxed) == 0)
    return;
  counted.fetch_add(1, std::memory_order_relaxed);
  ++counted_here;
  static const bool trace = std::getenv("ASIO_RDMA_TEST_TRACE_ALLOCATIONS") != nullptr;
  if (trace && !tracing) {
    tracing = true; // backtrace() may allocate on its first call
    void* frames[32];
    const int n = ::backtrace(frames, 32);
    ::write(2, "counted allocation:\n", 20);
    ::backtrace_symbols_fd(frames, n, 2);
    tracing = false;
  }
}

void* allocate(std::size_t size) {
  count();
  if (void* p = std::malloc(size ? size : 1))
    return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  count();
  const auto a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a))
    return p;
  throw std::bad_alloc();
}

} // namespace

namespace asio_rdma::test {

std::size_t allocations() noexcept {
  return counted.load(std::memory_order_relaxed);
}

std::size_t thread_allocations() noexcept { return counted_here; }

counting_scope::counting_scope(counted_threads which) noexcept
    : which_(which),
      start_(which == counted_threads::all ? allocations() : thread_allocations()) {
  scopes.fetch_add(1, std::memory_order_relaxed);
}

counting_scope::~counting_scope() {
  scopes.fetch_sub(1, std::memory_order_relaxed);
}

} // namespace asio_rdma::test

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) { return allocate_aligned(size, align); }
void* operator new[](std::size_t size, std::align_val_t align) {
  return allocate_aligned(size, align);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
