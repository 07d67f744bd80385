// A one-sided or zero-copy operation as the templates hand it to lib/.
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
  std::array<local_buffer, max_local> local{};
  std::size_t count = 0;
  bool too_many = false;
  remote_buffer remote{};
  std::uint64_t compare_add = 0; // compare (compare_swap) or addend (fetch_add)
  std::uint64_t swap = 0;
  std::optional<std::uint32_t> immediate;

  void add(const local_buffer& b) {
    if (count == max_local)
      too_many = true;
    else
      local[count++] = b;
  }
  void add(std::span<const local_buffer> list) {
    for (const auto& b : list)
      add(b);
  }
};

} // namespace asio_rdma::detail
