// What a work completion's wr_id points to. Every posted work request carries
// the address of a completion_target; the completion queue calls its function
// pointer. No map, no virtual call, no std::function on this path.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace asio_rdma::detail {

struct completion_target {
  using function = void (*)(completion_target* self, const ibv_wc& wc);
  function on_complete = nullptr;

  std::uint64_t wr_id() noexcept { return reinterpret_cast<std::uintptr_t>(this); }
  static completion_target* from(std::uint64_t wr_id) noexcept {
    return reinterpret_cast<completion_target*>(static_cast<std::uintptr_t>(wr_id));
  }
  static completion_target* from(const ibv_wc& wc) noexcept { return from(wc.wr_id); }
};

} // namespace asio_rdma::detail
