#include "verbs/receive_ring.hpp"

#include "verbs/verbs_error.hpp"

#include <algorithm>

namespace asio_rdma::detail {

error_code registered_block::allocate(ibv_pd* pd, std::size_t slots, std::size_t size,
                                      int access) {
  slot_size = size;
  const std::size_t page = 4096;
  std::size_t bytes = (std::max<std::size_t>(slots * size, 1) + page - 1) / page * page;
  memory.reset(static_cast<std::byte*>(std::aligned_alloc(page, bytes)));
  if (!memory)
    return boost::asio::error::no_memory;
  mr.reset(::ibv_reg_mr(pd, memory.get(), bytes, access));
  if (!mr)
    return from_errno();
  return {};
}

error_code receive_ring::init(ibv_pd* pd, std::uint32_t depth, std::size_t slot_size,
                              completion_target::function on_complete, void* owner) {
  if (auto ec = block_.allocate(pd, depth, slot_size, IBV_ACCESS_LOCAL_WRITE))
    return ec;
  slots_.resize(depth);
  released_ = std::make_unique<std::uint32_t[]>(depth);
  released_count_ = 0;
  batch_ = 1;
  posted_ = low_water_ = 0;
  wrs_.resize(depth);
  sges_.resize(depth);
  for (std::uint32_t i = 0; i < depth; ++i) {
    slots_[i].on_complete = on_complete;
    slots_[i].owner = owner;
    slots_[i].index = i;
    release(i);
    // A slot's work request never changes, except for its link to the next one.
    sges_[i] = {reinterpret_cast<std::uintptr_t>(block_.slot(i)),
                static_cast<std::uint32_t>(slot_size), block_.mr->lkey};
    wrs_[i] = {};
    wrs_[i].wr_id = slots_[i].wr_id();
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].num_sge = 1;
  }
  return {};
}

ibv_recv_wr* receive_ring::chain() {
  // The device copies a work request when it is posted: relinking a posted
  // slot's request later changes nothing it holds.
  const std::size_t n = released_count_;
  for (std::size_t k = 0; k + 1 < n; ++k)
    wrs_[released_[k]].next = &wrs_[released_[k + 1]];
  wrs_[released_[n - 1]].next = nullptr;
  ibv_recv_wr* first = &wrs_[released_[0]];
  released_count_ = 0;
  return first;
}

void receive_ring::post_in_batches() noexcept {
  const auto depth = static_cast<std::uint32_t>(slots_.size());
  if (depth < 16)
    return;
  batch_ = std::min<std::uint32_t>(8, depth / 8);
  low_water_ = depth - 2 * batch_;
}

template <typename Queue, typename Post>
error_code receive_ring::post_released(Queue* queue, Post post) {
  if (released_count_ == 0)
    return {};
  posted_ += released_count_; // less the unposted, below
  ibv_recv_wr* first = chain();
  ibv_recv_wr* bad = nullptr;
  if (int rc = post(queue, first, &bad)) {
    // Requests from `bad` on were not posted: their slots stay released, so the next
    // post_to() retries them instead of the ring shrinking for good (a shared receive
    // queue outlives one failed post). Without `bad` nothing is known to be unposted, and
    // posting a slot twice would let two messages land in one buffer: none is kept.
    for (ibv_recv_wr* wr = bad; wr != nullptr; wr = wr->next) {
      release(static_cast<receive_slot*>(completion_target::of(wr->wr_id))->index);
      --posted_;
    }
    return from_returned_errno(rc);
  }
  return {};
}

error_code receive_ring::post_to(ibv_qp* qp) {
  return post_released(qp, [](ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return ::ibv_post_recv(q, wr, bad);
  });
}

error_code receive_ring::post_to(ibv_srq* srq) {
  return post_released(srq, [](ibv_srq* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return ::ibv_post_srq_recv(q, wr, bad);
  });
}

} // namespace asio_rdma::detail
