// The one shape of a callback in the layers below the I/O objects: a function pointer and
// its context. No std::function, no virtual call, no allocation: the fd waiter's "readable"
// and the completion queue's "batch done" are both this. (A work request's completion
// target is the same idea with the target as its own context: verbs/completion.hpp.)
#pragma once

namespace asio_rdma::detail {

struct callback {
  void (*function)(void* context) = nullptr;
  void* context = nullptr;

  explicit operator bool() const noexcept { return function != nullptr; }
  void operator()() const { function(context); }
};

} // namespace asio_rdma::detail
