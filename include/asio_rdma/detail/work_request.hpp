// A one-sided or zero-copy operation as the templates hand it to lib/, and
// the by-value capture of its local buffers that an initiation carries.
#pragma once

#include <asio_rdma/detail/buffer_array.hpp>
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
  /// The local buffers, owned by the initiation's captured_list (at most max_local).
  list_view<local_buffer> local;
  remote_buffer remote{};
  std::uint64_t compare_add = 0; // compare (compare_swap) or addend (fetch_add)
  std::uint64_t swap = 0;
  std::optional<std::uint32_t> immediate;
};

/// `request` pointing at `local`, the local buffers as the initiation carries them (valid
/// while `local` lives). N = 1 for the one-buffer overloads, the common case: 24 bytes to
/// carry instead of 16 entries; N = 0 for atomics, whose result lands in library memory.
template <std::size_t N>
work_request with_local(work_request request,
                        const captured_list<local_buffer, N>& local) noexcept {
  request.local = local.view();
  return request;
}

} // namespace asio_rdma::detail
