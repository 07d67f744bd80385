// A one-sided or zero-copy operation as the templates hand it to lib/, and
// the by-value capture of its local buffers that an initiation carries.
#pragma once

#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace asio_rdma::detail {

struct work_request {
  enum class kind : std::uint8_t { send, write, read, fetch_add, compare_swap };
  static constexpr std::size_t max_local = 16;

  kind op = kind::send;
  /// `count` local buffers, owned by the initiation's local_capture.
  const local_buffer* local = nullptr;
  std::size_t count = 0;
  /// More than max_local local buffers were given.
  bool too_many = false;
  remote_buffer remote{};
  std::uint64_t compare_add = 0; // compare (compare_swap) or addend (fetch_add)
  std::uint64_t swap = 0;
  std::optional<std::uint32_t> immediate;
};

/// The local buffers of a work request, copied into the initiation (a
/// deferred or awaitable operation stores its arguments, and the caller's
/// span may be gone when it starts). N = 1 for the one-buffer overloads,
/// the common case: 24 bytes to carry instead of 16 entries.
template <std::size_t N> struct local_capture {
  std::array<local_buffer, N> local;
  std::size_t count = 0;
  bool too_many = false;

  explicit local_capture(std::span<const local_buffer> list) {
    for (const auto& b : list) {
      if (count == N) {
        too_many = true;
        break;
      }
      local[count++] = b;
    }
  }
  /// `request` pointing at these buffers (valid while this capture lives).
  work_request attach(work_request request) const {
    request.local = local.data();
    request.count = count;
    request.too_many = too_many;
    return request;
  }
};

} // namespace asio_rdma::detail
