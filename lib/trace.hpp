// Control-path tracing to stderr, enabled by the environment variable
// ASIO_RDMA_TRACE=1. Never used on the data path.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace asio_rdma::detail {

inline bool trace_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("ASIO_RDMA_TRACE");
    return v && *v && *v != '0';
  }();
  return enabled;
}

#define ASIO_RDMA_TRACE(...)                                                                      \
  do {                                                                                            \
    if (::asio_rdma::detail::trace_enabled()) {                                                   \
      std::fprintf(stderr, "asio_rdma: " __VA_ARGS__);                                            \
      std::fputc('\n', stderr);                                                                   \
    }                                                                                             \
  } while (0)

} // namespace asio_rdma::detail
