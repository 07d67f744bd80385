// Messages the device has received into the connection's receive ring and no
// receive operation has taken yet, in arrival order, and the copy of one into
// a receive's buffers. No verbs call: test/unit/rc/arrival_queue_test.cpp
// covers it without a device.
#pragma once

#include <asio_rdma/detail/buffer_array.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/assert.hpp>
#include <boost/circular_buffer.hpp>

#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace asio_rdma::detail {

struct arrived_message {
  std::uint32_t slot = 0; // receive ring slot that holds the bytes
  std::uint32_t length = 0;
  std::uint32_t immediate = 0; // host order
  bool has_immediate = false;
  bool rdma_write = false; // RDMA write with immediate: the data is in our region, not the slot

  /// What a successful receive completion in ring slot `slot` says.
  static arrived_message from(std::uint32_t slot, const ibv_wc& wc) noexcept {
    arrived_message m;
    m.slot = slot;
    m.length = wc.byte_len;
    m.has_immediate = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    m.immediate = m.has_immediate ? ntohl(wc.imm_data) : 0;
    m.rdma_write = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
    return m;
  }
};

/// A fixed ring: at most as many messages can be waiting as receive buffers
/// were posted, so its capacity is the receive queue depth and push never
/// allocates.
class arrival_queue {
public:
  void reset(std::size_t capacity) { ring_ = boost::circular_buffer<arrived_message>(capacity); }
  bool empty() const noexcept { return ring_.empty(); }
  std::size_t size() const noexcept { return ring_.size(); }
  bool full() const noexcept { return ring_.full(); }

  /// The caller guarantees room (one slot per posted receive buffer).
  void push(const arrived_message& m) noexcept {
    BOOST_ASSERT(!ring_.full()); // circular_buffer would overwrite the oldest
    ring_.push_back(m);
  }
  const arrived_message& front() const noexcept { return ring_.front(); }
  void pop() noexcept { ring_.pop_front(); }

private:
  boost::circular_buffer<arrived_message> ring_;
};

/// True if `msg` can be taken by a receive into `destination`: its bytes fit, or it has
/// none to copy (an RDMA write with immediate left its data in the writer's target region).
inline bool fits(const arrived_message& msg, const mutable_buffer_array& destination) noexcept {
  return msg.rdma_write || msg.length <= destination.total_size;
}

/// Copies a message of `length` bytes at `source` over `destination`'s
/// buffers in order. The caller has checked that it fits (see fits()).
inline void scatter(const std::byte* source, std::size_t length,
                    const mutable_buffer_array& destination) noexcept {
  for (std::size_t i = 0; i < destination.count && length > 0; ++i) {
    const std::size_t n = std::min(length, destination.items[i].size());
    std::memcpy(destination.items[i].data(), source, n);
    source += n;
    length -= n;
  }
}

} // namespace asio_rdma::detail
