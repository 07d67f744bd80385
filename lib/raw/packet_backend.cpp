#include "raw/packet_backend.hpp"

#include "raw/bpf_filter.hpp"
#include "verbs/verbs_error.hpp"

#include <linux/if_ether.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace asio_rdma::detail {
namespace {

constexpr auto flush_poll_period = std::chrono::microseconds(50);

template <typename T> int set_option(int fd, int level, int name, const T& value) {
  return ::setsockopt(fd, level, name, &value, sizeof value);
}

int attach_filter(int fd, const std::vector<sock_filter>& program) {
  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(program.size());
  fprog.filter = const_cast<sock_filter*>(program.data());
  return set_option(fd, SOL_SOCKET, SO_ATTACH_FILTER, fprog);
}

std::uint32_t block_status(const tpacket_block_desc* desc) noexcept {
  return __atomic_load_n(&desc->hdr.bh1.block_status, __ATOMIC_ACQUIRE);
}

} // namespace

std::unique_ptr<backend> packet_backend::open(const interface_info& interface,
                                              const raw_socket_options& options, error_code& ec) {
  std::unique_ptr<packet_backend> self(new packet_backend());
  ec = self->setup(interface, options);
  if (ec)
    return nullptr;
  return self;
}

error_code packet_backend::setup(const interface_info& interface,
                                 const raw_socket_options& options) {
  caps_.backend = raw_backend::packet;
  caps_.steals_matching_packets = false;
  caps_.receive_timestamps = true;
  caps_.checksum_offload = false;
  caps_.vlan_tag_in_data = false;
  caps_.send_buffers = options.send_buffers;
  caps_.receive_buffers = options.receive_buffers;
  caps_.max_packet_size = options.max_packet_size;
  caps_.max_flows = options.max_flows;
  snap_length_ = static_cast<std::uint32_t>(options.max_packet_size);
  rules_.resize(options.max_flows);

  // Protocol 0: nothing is queued before bind(); the reject-all filter is in place before
  // bind() so that no unfiltered frame can reach the ring in between.
  fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    return from_errno();
  if (set_option(fd_, SOL_PACKET, PACKET_VERSION, int{TPACKET_V3}) != 0)
    return from_errno();
  if (attach_filter(fd_, reject_all_filter()) != 0)
    return from_errno();
  if (set_option(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, int{1}) != 0)
    return from_errno();

  // Ring geometry: room for receive_buffers maximal frames, in blocks. Large blocks keep the
  // per-block costs (one wakeup, one retire) small under load: 4 KiB blocks cost about three
  // times tcpdump's CPU per frame, 512 KiB ones less than tcpdump. At least 16 blocks, though:
  // a lent packet pins its whole block until released (and under light load the retire timer
  // closes blocks holding one frame), so the user can always hold min(receive_buffers, 16)
  // batches at once.
  const std::size_t frame_size =
      TPACKET_ALIGN(TPACKET3_HDRLEN + 64 + static_cast<unsigned>(options.max_packet_size));
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t ring_bytes = options.receive_buffers * frame_size;
  const std::size_t smallest = std::max(page, std::bit_ceil(frame_size));
  const std::size_t largest = std::max(smallest, std::size_t{1} << 20);
  block_size_ = static_cast<std::uint32_t>(
      std::clamp(std::bit_floor(std::max<std::size_t>(1, ring_bytes / 16)), smallest, largest));
  block_count_ = static_cast<std::uint32_t>(
      std::max<std::size_t>(2, (ring_bytes + block_size_ - 1) / block_size_));
  tpacket_req3 request{};
  request.tp_block_size = block_size_;
  request.tp_block_nr = block_count_;
  request.tp_frame_size = static_cast<unsigned>(frame_size);
  request.tp_frame_nr = (block_size_ / request.tp_frame_size) * block_count_;
  request.tp_retire_blk_tov = static_cast<unsigned>(block_timeout_.count());
  if (set_option(fd_, SOL_PACKET, PACKET_RX_RING, request) != 0)
    return from_errno();
  ring_size_ = std::size_t{block_size_} * block_count_;
  ring_ = ::mmap(nullptr, ring_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (ring_ == MAP_FAILED) {
    ring_ = nullptr;
    return from_errno();
  }
  lent_.assign(block_count_, 0);
  consumed_.assign(block_count_, 0);

  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = static_cast<int>(interface.index);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return from_errno();
  // Drain: hand back any block the kernel filled before the filter could act.
  for (std::uint32_t i = 0; i < block_count_; ++i)
    if (block_status(block(i)) & TP_STATUS_USER)
      return_block(i);

  const std::size_t buffers = options.send_buffers;
  send_memory_.reset(new (std::nothrow) std::byte[buffers * options.max_packet_size]);
  if (!send_memory_)
    return error_code(ENOMEM, boost::system::system_category());
  free_send_.resize(buffers);
  for (std::size_t i = 0; i < buffers; ++i)
    free_send_[i] = static_cast<std::uint32_t>(buffers - 1 - i);
  messages_.resize(buffers);
  vectors_.resize(buffers);
  return {};
}

packet_backend::~packet_backend() {
  shutdown();
  if (ring_)
    ::munmap(ring_, ring_size_);
}

void packet_backend::shutdown() noexcept {
  if (fd_ >= 0)
    ::close(fd_); // the mapping stays valid for lent packets until munmap
  fd_ = -1;
}

raw_statistics packet_backend::statistics() noexcept {
  if (fd_ >= 0) {
    tpacket_stats_v3 kernel{};
    socklen_t length = sizeof kernel;
    // The kernel resets its counters on each read: accumulate.
    if (::getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &kernel, &length) == 0)
      statistics_.receive_dropped += kernel.tp_drops;
  }
  return statistics_;
}

tpacket_block_desc* packet_backend::block(std::uint32_t index) const noexcept {
  return reinterpret_cast<tpacket_block_desc*>(static_cast<std::byte*>(ring_) +
                                               std::size_t{index} * block_size_);
}

void packet_backend::return_block(std::uint32_t index) noexcept {
  consumed_[index] = 0;
  __atomic_store_n(&block(index)->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
}

std::size_t packet_backend::poll_receive(std::span<received_packet> out, error_code& ec) noexcept {
  ec = {};
  if (fd_ < 0) {
    ec = boost::asio::error::bad_descriptor;
    return 0;
  }
  std::size_t n = 0;
  while (n < out.size()) {
    if (remaining_in_block_ == 0) {
      auto* desc = block(current_block_);
      // A consumed block still lent to the user also reads TP_STATUS_USER: not new.
      if (consumed_[current_block_] || !(block_status(desc) & TP_STATUS_USER))
        break;
      remaining_in_block_ = desc->hdr.bh1.num_pkts;
      next_packet_ = reinterpret_cast<tpacket3_hdr*>(reinterpret_cast<std::byte*>(desc) +
                                                     desc->hdr.bh1.offset_to_first_pkt);
      if (remaining_in_block_ == 0) { // an empty block retired by the timer
        consumed_[current_block_] = 1;
        if (lent_[current_block_] == 0)
          return_block(current_block_);
        current_block_ = (current_block_ + 1) % block_count_;
        continue;
      }
    }
    tpacket3_hdr* header = next_packet_;
    auto* frame = reinterpret_cast<std::byte*>(header) + header->tp_mac;
    received_packet& packet = out[n++];
    packet.data = std::span<std::byte>(frame, header->tp_snaplen);
    packet.wire_length = header->tp_len;
    packet.timestamp = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(header->tp_sec) + std::chrono::nanoseconds(header->tp_nsec)));
    if (header->tp_status & TP_STATUS_VLAN_VALID)
      packet.vlan_tci = header->hv1.tp_vlan_tci;
    else
      packet.vlan_tci.reset();
    raw_packet_access::set_id(packet, current_block_);
    ++lent_[current_block_];
    if (--remaining_in_block_ > 0) {
      next_packet_ = reinterpret_cast<tpacket3_hdr*>(reinterpret_cast<std::byte*>(header) +
                                                     header->tp_next_offset);
    } else {
      consumed_[current_block_] = 1;
      current_block_ = (current_block_ + 1) % block_count_;
    }
  }
  statistics_.received += n;
  return n;
}

wait_plan packet_backend::receive_wait_plan(error_code& ec) noexcept {
  ec = {};
  // poll() reports the socket readable while the block before the kernel's current one is not
  // back in the kernel's hands. When the user still holds that block, waiting on the fd would
  // spin: poll at the block retire period instead until it is released.
  const std::uint32_t previous = (current_block_ + block_count_ - 1) % block_count_;
  if (consumed_[previous] && lent_[previous] > 0)
    return {wait_plan::timer, -1, block_timeout_};
  return {wait_plan::readable, fd_, {}};
}

void packet_backend::release(std::span<const received_packet> packets) noexcept {
  for (const auto& packet : packets) {
    const std::uint32_t index = raw_packet_access::id(packet);
    if (--lent_[index] == 0 && consumed_[index])
      return_block(index);
  }
}

std::size_t packet_backend::acquire(std::span<send_packet> out) noexcept {
  const std::size_t n = std::min(out.size(), free_send_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t id = free_send_.back();
    free_send_.pop_back();
    out[i] = raw_packet_access::lend(
        std::span<std::byte>(send_memory_.get() + std::size_t{id} * caps_.max_packet_size,
                             caps_.max_packet_size),
        id);
  }
  return n;
}

void packet_backend::give_back(std::span<const send_packet> packets) noexcept {
  for (const auto& packet : packets)
    free_send_.push_back(raw_packet_access::id(packet)); // capacity is send_buffers: never allocates
}

std::size_t packet_backend::post(std::span<const send_packet> packets, error_code& ec) noexcept {
  ec = {};
  if (fd_ < 0) {
    ec = boost::asio::error::bad_descriptor;
    return 0;
  }
  std::size_t done = 0;
  while (done < packets.size()) {
    const std::size_t count = std::min(packets.size() - done, messages_.size());
    for (std::size_t i = 0; i < count; ++i) {
      const send_packet& packet = packets[done + i];
      vectors_[i] = {packet.buffer().data(), packet.length};
      messages_[i] = {};
      messages_[i].msg_hdr.msg_iov = &vectors_[i];
      messages_[i].msg_hdr.msg_iovlen = 1;
    }
    const int sent = ::sendmmsg(fd_, messages_.data(), static_cast<unsigned>(count), MSG_DONTWAIT);
    if (sent > 0) {
      give_back(packets.subspan(done, static_cast<std::size_t>(sent)));
      statistics_.sent += static_cast<std::uint64_t>(sent);
      done += static_cast<std::size_t>(sent);
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      break;
    if (errno == ENOBUFS) {
      // The device queue dropped the frame: gone, as on a congested wire.
      give_back(packets.subspan(done, 1));
      ++statistics_.send_dropped;
      ++done;
      continue;
    }
    ec = from_errno();
    break;
  }
  return done;
}

bool packet_backend::poll_sent(error_code& ec) noexcept {
  ec = {};
  if (fd_ < 0)
    return true;
  int queued = 0;
  if (::ioctl(fd_, SIOCOUTQ, &queued) != 0) {
    ec = from_errno();
    return true;
  }
  return queued == 0;
}

wait_plan packet_backend::send_wait_plan(bool blocked, bool flushing, error_code& ec) noexcept {
  ec = {};
  if (blocked)
    return {wait_plan::writable, fd_, {}};
  // The kernel signals no event when it frees a sent frame that an edge-triggered reactor
  // could rely on; a flush polls SIOCOUTQ at a short period instead.
  if (flushing)
    return {wait_plan::timer, -1, flush_poll_period};
  return {};
}

error_code packet_backend::install_filter() noexcept {
  try {
    std::vector<flow_rule> active;
    active.reserve(rules_.size());
    for (const auto& rule : rules_)
      if (rule)
        active.push_back(*rule);
    const auto program =
        active.empty() ? reject_all_filter() : compile_flow_filter(active, snap_length_);
    // SO_ATTACH_FILTER swaps programs atomically: no frame sees a half-updated rule set.
    if (attach_filter(fd_, program) != 0)
      return from_errno();
    return {};
  } catch (const std::bad_alloc&) {
    return error_code(ENOMEM, boost::system::system_category());
  }
}

error_code packet_backend::set_flow(std::size_t index, const flow_rule& rule) noexcept {
  if (fd_ < 0)
    return boost::asio::error::bad_descriptor;
  auto previous = rules_[index];
  rules_[index] = rule;
  auto ec = install_filter();
  if (ec)
    rules_[index] = previous;
  return ec;
}

error_code packet_backend::clear_flow(std::size_t index) noexcept {
  if (fd_ < 0)
    return boost::asio::error::bad_descriptor;
  auto previous = rules_[index];
  rules_[index].reset();
  auto ec = install_filter();
  if (ec)
    rules_[index] = previous;
  return ec;
}

} // namespace asio_rdma::detail
