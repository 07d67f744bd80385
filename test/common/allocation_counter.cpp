// The global operator new and delete of a test that counts heap allocations
// (allocation_counter.hpp): malloc and free, plus a count while counting is on. Asio's
// handler memory does not come from operator new: its recycling allocator, when its
// per-thread cache (two blocks per purpose) has no block that fits, calls aligned_alloc,
// which is replaced here too and counted once a test asks (count_aligned_alloc; not in
// sanitizer builds, whose runtime owns aligned_alloc).
#include "allocation_counter.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_ALIGNED_ALLOC 1
// glibc's own aligned allocation, which its aligned_alloc is (memory it frees with free).
extern "C" void* __libc_memalign(std::size_t alignment, std::size_t size);
#else
#define COUNT_ALIGNED_ALLOC 0
#endif

namespace {

std::atomic<std::size_t> counted{0};
std::atomic<bool> aligned_counted{false};
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
    char line[64]; // the thread, to tell a client's allocations from its server's
    const int len = std::snprintf(line, sizeof line, "counted allocation (thread %d):\n", ::gettid());
    ::write(2, line, static_cast<std::size_t>(len));
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

void* uncounted_aligned(std::size_t alignment, std::size_t size) {
#if COUNT_ALIGNED_ALLOC
  return __libc_memalign(alignment, size);
#else
  return std::aligned_alloc(alignment, size);
#endif
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  count();
  const auto a = static_cast<std::size_t>(align);
  if (void* p = uncounted_aligned(a, (size + a - 1) / a * a))
    return p;
  throw std::bad_alloc();
}

} // namespace

#if COUNT_ALIGNED_ALLOC
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  if (aligned_counted.load(std::memory_order_relaxed))
    count();
  return __libc_memalign(alignment, size);
}
#endif

namespace asio_rdma::test {

std::size_t allocations() noexcept {
  return counted.load(std::memory_order_relaxed);
}

std::size_t thread_allocations() noexcept { return counted_here; }

bool count_aligned_alloc(bool on) noexcept {
  aligned_counted.store(on, std::memory_order_relaxed);
  return COUNT_ALIGNED_ALLOC != 0;
}

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
