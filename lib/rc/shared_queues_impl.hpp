// The state behind asio_rdma::shared_queues: a shared completion queue, a
// shared receive queue with its ring of buffers, and the table from queue
// pair number to connection that routes SRQ receive completions.
#pragma once

#include "async/completion_queue.hpp"
#include "verbs/device.hpp"
#include "verbs/handles.hpp"
#include "verbs/receive_ring.hpp"

#include <asio_rdma/shared_queues.hpp>

#include <memory>
#include <vector>

namespace asio_rdma::detail {

class connection_impl;

class shared_queues_impl : public std::enable_shared_from_this<shared_queues_impl> {
public:
  shared_queues_impl(const boost::asio::any_io_executor& ex, const shared_queue_options& options)
      : ex_(ex), options_(options) {}
  ~shared_queues_impl();

  /// Creates the queues on `dev` on first use; later, checks it is the same device.
  error_code bind(const std::shared_ptr<device>& dev);

  const std::shared_ptr<completion_queue>& cq() const { return cq_; }
  ibv_srq* srq() const { return srq_.get(); }
  receive_ring& ring() { return ring_; }

  /// Takes `entries` of the shared CQ for a connection's send queue, growing the CQ
  /// when they do not fit; fails with errc::device_limit_exceeded where it cannot grow.
  error_code reserve(std::uint32_t entries);
  /// Gives back what reserve() took.
  void unreserve(std::uint32_t entries) noexcept { reserved_ -= entries; }
  std::size_t cq_entries() const noexcept { return cq_ ? std::size_t(cq_->native()->cqe) : 0; }

  /// Routes the SRQ receive completions of queue pair `qp_num` to `conn`.
  void add(std::uint32_t qp_num, connection_impl* conn);
  void remove(std::uint32_t qp_num);
  std::size_t connections() const { return count_; }

  /// Gives a receive buffer back; it is reposted at the end of the batch.
  void release(std::uint32_t slot);

private:
  static void on_receive(completion_target* target, const ibv_wc& wc, from origin);
  static void after_batch(void* self);
  void post_released();
  connection_impl* find(std::uint32_t qp_num) const;
  void grow();

  boost::asio::any_io_executor ex_;
  shared_queue_options options_;
  std::shared_ptr<device> device_;
  std::shared_ptr<completion_queue> cq_;
  srq_ptr srq_;
  receive_ring ring_;
  bool post_scheduled_ = false;
  bool in_batch_ = false;
  // CQ entries taken: the SRQ's depth and each attached connection's send queue.
  std::uint64_t reserved_ = 0;

  // Open addressing, linear probing; qp_num 0 (QP0) never occurs, so 0 marks
  // a free entry. Grown (rehashed) only when a connection is added.
  struct entry {
    std::uint32_t qp_num = 0;
    connection_impl* conn = nullptr;
  };
  std::vector<entry> table_ = std::vector<entry>(64);
  std::size_t count_ = 0;
};

} // namespace asio_rdma::detail
