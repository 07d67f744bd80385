// The AF_PACKET backend: TPACKET_V3 receive ring, classic BPF filter compiled from the flow
// rules, sendmmsg from library-owned send buffers.
#pragma once

#include "raw/backend.hpp"
#include "raw/interface_info.hpp"

#include <linux/if_packet.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <optional>
#include <vector>

namespace asio_rdma::detail {

class packet_backend final : public backend {
public:
  /// Opens the socket in the calling thread's network namespace. Options are validated.
  static std::unique_ptr<backend> open(const interface_info& interface,
                                       const raw_socket_options& options, error_code& ec);
  ~packet_backend() override;

  const raw_caps& caps() const noexcept override { return caps_; }
  raw_statistics statistics() noexcept override;
  int receive_fd() const noexcept override { return fd_; }
  int send_fd() const noexcept override { return fd_; }

  std::size_t poll_receive(std::span<received_packet> out, error_code& ec) noexcept override;
  wait_plan receive_wait_plan(error_code& ec) noexcept override;
  void on_receive_ready() noexcept override {}
  void release(std::span<const received_packet> packets) noexcept override;

  std::size_t acquire(std::span<send_packet> out) noexcept override;
  void give_back(std::span<const send_packet> packets) noexcept override;
  std::size_t post(std::span<const send_packet> packets, error_code& ec) noexcept override;
  bool poll_sent(error_code& ec) noexcept override;
  wait_plan send_wait_plan(bool blocked, bool flushing, error_code& ec) noexcept override;
  void on_send_ready() noexcept override {}

  error_code set_flow(std::size_t index, const flow_rule& rule) noexcept override;
  error_code clear_flow(std::size_t index) noexcept override;
  void shutdown() noexcept override;

private:
  packet_backend() = default;
  error_code setup(const interface_info& interface, const raw_socket_options& options);
  error_code install_filter() noexcept;
  tpacket_block_desc* block(std::uint32_t index) const noexcept;
  void return_block(std::uint32_t index) noexcept;

  int fd_ = -1;
  raw_caps caps_;
  std::uint32_t snap_length_ = 0;

  // Receive ring. A block goes back to the kernel when every packet in it was handed out
  // (consumed_) and released (lent_ == 0), in any order.
  void* ring_ = nullptr;
  std::size_t ring_size_ = 0;
  std::uint32_t block_size_ = 0;
  std::uint32_t block_count_ = 0;
  std::chrono::milliseconds block_timeout_{1};
  std::uint32_t current_block_ = 0;
  tpacket3_hdr* next_packet_ = nullptr;
  std::uint32_t remaining_in_block_ = 0;
  std::vector<std::uint32_t> lent_;
  std::vector<std::uint8_t> consumed_;

  // Send buffers: one block of send_buffers * max_packet_size bytes; free ones on a stack.
  std::unique_ptr<std::byte[]> send_memory_;
  std::vector<std::uint32_t> free_send_;
  std::vector<mmsghdr> messages_;
  std::vector<iovec> vectors_;

  std::vector<std::optional<flow_rule>> rules_;
  raw_statistics statistics_;
};

} // namespace asio_rdma::detail
