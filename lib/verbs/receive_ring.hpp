// Receive buffers kept posted by the library: one registered slab of
// equal-sized slots, posted to a queue pair (one connection) or to a shared
// receive queue (many). Slots given back are reposted in one chained post, and a ring of
// one connection's own waits for a few to repost them together (post_in_batches).
#pragma once

#include "verbs/completion.hpp"
#include "verbs/handles.hpp"

#include <asio_rdma/error.hpp>

#include <boost/assert.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace asio_rdma::detail {

struct free_deleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

/// Page-aligned memory registered with a protection domain.
struct registered_block {
  std::unique_ptr<std::byte, free_deleter> memory;
  mr_ptr mr;
  std::size_t slot_size = 0;

  error_code allocate(ibv_pd* pd, std::size_t slots, std::size_t slot_size, int access);
  std::byte* slot(std::uint32_t index) const { return memory.get() + index * slot_size; }
};

/// One receive buffer; its address is the receive work request's wr_id.
struct receive_slot : completion_target {
  void* owner = nullptr; // the connection_impl or shared_queues_impl
  std::uint32_t index = 0;
};

class receive_ring {
public:
  /// Allocates and registers `depth` slots of `slot_size` bytes; all start
  /// out released (to be posted by the next post_to()).
  error_code init(ibv_pd* pd, std::uint32_t depth, std::size_t slot_size,
                  completion_target::function on_complete, void* owner);

  std::uint32_t depth() const { return static_cast<std::uint32_t>(slots_.size()); }
  std::byte* slot(std::uint32_t index) const { return block_.slot(index); }

  /// Gives a slot back; it is posted again by the next post_to(). Each slot is released
  /// once between posts, so the list never outgrows the ring (and never allocates).
  void release(std::uint32_t index) noexcept {
    BOOST_ASSERT(released_count_ < slots_.size());
    released_[released_count_++] = index;
  }
  bool has_released() const { return released_count_ != 0; }
  std::uint32_t released_count() const { return released_count_; }
  void forget_released() { released_count_ = 0; }

  /// Reposts slots in batches: post_due() asks for a post once depth / 8 slots (at most 8)
  /// are released, or, sooner, once fewer than depth - 2 * batch are posted (slots the user
  /// holds, lent, must not leave the peer short of buffers). A ping-pong then posts one
  /// chain per 8 messages, not a call per message (rxe: about 250 instructions a call). A
  /// ring of fewer than 16 slots posts every slot at once, as one without batches does.
  /// The caller counts the completions of posted slots (consumed()).
  void post_in_batches() noexcept;
  /// Whether post_to() is due: any slot released, or, in batches, enough of them (above).
  bool post_due() const noexcept {
    return released_count_ >= batch_ || (released_count_ != 0 && posted_ < low_water_);
  }
  /// A posted slot's work completion arrived (with a message, or flushed).
  void consumed() noexcept { --posted_; }

  /// Posts every released slot in one chained call.
  error_code post_to(ibv_qp* qp);
  error_code post_to(ibv_srq* srq);

private:
  /// Links the released slots' work requests in release order; returns the first.
  /// Precondition: some slot is released.
  ibv_recv_wr* chain();
  template <typename Queue, typename Post> error_code post_released(Queue* queue, Post post);

  registered_block block_;
  std::vector<receive_slot> slots_;
  std::unique_ptr<std::uint32_t[]> released_; // one per slot; the first released_count_ hold
  std::uint32_t released_count_ = 0;          // slots released since the last post
  std::uint32_t batch_ = 1;     // slots released before post_due() (post_in_batches)
  std::uint32_t posted_ = 0;    // slots posted whose completion has not arrived (read and
                                // kept exact only in batches: consumed() is the caller's)
  std::uint32_t low_water_ = 0; // fewer posted: post_due() at the first release (batches)
  std::vector<ibv_recv_wr> wrs_; // one per slot, built once (init)
  std::vector<ibv_sge> sges_;    // one per slot
};

} // namespace asio_rdma::detail
