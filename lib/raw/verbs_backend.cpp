#include "raw/verbs_backend.hpp"

#include "raw/verbs_device.hpp"
#include "raw/verbs_flow.hpp"
#include "verbs/completion.hpp"
#include "verbs/handles.hpp"
#include "verbs/receive_ring.hpp"
#include "verbs/verbs_error.hpp"

#include <infiniband/verbs.h>

#include <fcntl.h>

#include <algorithm>
#include <vector>

namespace asio_rdma::detail {
namespace {

/// A completion queue with its own channel, in the library's one event model
/// (event_counted_cq): armed when the core is about to wait, one event taken per wake-up.
/// Not async/completion_queue: that one dispatches every completion to a
/// completion_target and waits by itself, where this backend is polled for at most as many
/// packets as the caller takes, and the core does the waiting (backend.hpp).
struct notifying_cq {
  comp_channel_ptr channel;
  event_counted_cq cq; // declared after channel: destroyed before it
  bool armed = false;

  error_code create(ibv_context* context, std::size_t entries) {
    channel.reset(ibv_create_comp_channel(context));
    if (!channel)
      return from_errno();
    if (auto ec = set_nonblocking(channel->fd))
      return ec;
    return cq.create(context, static_cast<int>(entries), channel.get());
  }
  /// Arms the CQ once: retry, so that the caller polls again (a completion that arrived
  /// before the arming raises no event); then wait on the channel.
  wait_plan plan(error_code& ec) noexcept {
    if (!armed) {
      if ((ec = cq.arm()))
        return {};
      armed = true;
      return {wait_plan::retry, -1, {}};
    }
    return {wait_plan::readable, channel->fd, {}};
  }
  void on_ready() noexcept {
    if (channel && cq.take_event(channel.get()))
      armed = false;
  }
  void reset() noexcept {
    cq.reset();
    channel.reset();
  }
};

bool means_unsupported(int error) {
  return error == EOPNOTSUPP || error == ENOSYS || error == EPROTONOSUPPORT || error == EINVAL ||
         error == EPERM || error == EACCES;
}

class verbs_backend final : public backend {
public:
  error_code setup(const interface_info& interface, const raw_socket_options& options);
  ~verbs_backend() override { shutdown(); }

  const raw_caps& caps() const noexcept override { return caps_; }
  raw_statistics statistics() noexcept override { return statistics_; }
  int receive_fd() const noexcept override { return receive_.channel ? receive_.channel->fd : -1; }
  int send_fd() const noexcept override { return send_.channel ? send_.channel->fd : -1; }

  std::size_t poll_receive(std::span<received_packet> out, error_code& ec) noexcept override;
  wait_plan receive_wait_plan(error_code& ec) noexcept override;
  void on_receive_ready() noexcept override;
  void release(std::span<const received_packet> packets) noexcept override;

  std::size_t acquire(std::span<send_packet> out) noexcept override;
  void give_back(std::span<const send_packet> packets) noexcept override;
  std::size_t post(std::span<const send_packet> packets, error_code& ec) noexcept override;
  bool poll_sent(error_code& ec) noexcept override;
  wait_plan send_wait_plan(bool blocked, bool flushing, error_code& ec) noexcept override;
  void on_send_ready() noexcept override;

  error_code set_flow(std::size_t index, const flow_rule& rule) noexcept override;
  error_code clear_flow(std::size_t index) noexcept override;
  void shutdown() noexcept override;

private:
  std::byte* buffer(std::uint32_t id) const noexcept { return memory_.slot(id); }

  raw_caps caps_;
  std::uint8_t port_ = 1;
  std::uint32_t receive_count_ = 0;

  // Declared in creation order: destroyed in reverse.
  context_ptr context_;
  pd_ptr pd_;
  notifying_cq receive_;
  notifying_cq send_;
  qp_ptr qp_;
  registered_block memory_; // receive buffers, then send buffers
  std::vector<flow_ptr> flows_;

  // Work requests prepared once per buffer; posting only links and sets lengths.
  std::vector<ibv_sge> receive_sges_;
  std::vector<ibv_recv_wr> receive_wrs_;
  std::vector<ibv_sge> send_sges_;
  std::vector<ibv_send_wr> send_wrs_;
  std::vector<ibv_wc> completions_;
  std::vector<std::uint32_t> free_send_;
  std::size_t in_flight_ = 0;
  error_code receive_error_; // a failed re-post, reported by the next poll_receive
  error_code send_error_;    // a failed send completion, reported by the next poll_sent
  raw_statistics statistics_;
};

error_code verbs_backend::setup(const interface_info& interface,
                                const raw_socket_options& options) {
  caps_.backend = raw_backend::verbs;
  caps_.steals_matching_packets = true;
  caps_.receive_timestamps = false;
  caps_.vlan_tag_in_data = true;
  caps_.send_buffers = options.send_buffers;
  caps_.receive_buffers = options.receive_buffers;
  caps_.max_packet_size = options.max_packet_size;
  caps_.max_flows = options.max_flows;
  flows_.resize(options.max_flows);

  int count = 0;
  device_list_ptr devices(ibv_get_device_list(&count));
  if (!devices || count == 0)
    return errc::no_device;
  ibv_device* device = find_verbs_device(devices.get(), interface.name, port_);
  if (!device)
    return errc::no_device;

  context_.reset(ibv_open_device(device));
  if (!context_)
    return from_errno();
  ibv_port_attr port_attr{};
  if (int ret = ibv_query_port(context_.get(), port_, &port_attr))
    return from_returned_errno(ret);
  if (port_attr.link_layer != IBV_LINK_LAYER_ETHERNET)
    return errc::raw_packet_unsupported;
  ibv_device_attr_ex device_attr{};
  if (ibv_query_device_ex(context_.get(), nullptr, &device_attr) == 0)
    caps_.checksum_offload = (device_attr.raw_packet_caps & IBV_RAW_PACKET_CAP_IP_CSUM) != 0;

  pd_.reset(ibv_alloc_pd(context_.get()));
  if (!pd_)
    return from_errno();
  if (auto ec = receive_.create(context_.get(), options.receive_buffers))
    return ec;
  if (auto ec = send_.create(context_.get(), options.send_buffers))
    return ec;

  ibv_qp_init_attr qp_attr{};
  qp_attr.send_cq = send_.cq.get();
  qp_attr.recv_cq = receive_.cq.get();
  qp_attr.cap.max_send_wr = static_cast<std::uint32_t>(options.send_buffers);
  qp_attr.cap.max_recv_wr = static_cast<std::uint32_t>(options.receive_buffers);
  qp_attr.cap.max_send_sge = 1;
  qp_attr.cap.max_recv_sge = 1;
  qp_attr.qp_type = IBV_QPT_RAW_PACKET;
  qp_attr.sq_sig_all = 1; // every send completes: buffers come back one by one
  qp_.reset(ibv_create_qp(pd_.get(), &qp_attr));
  if (!qp_) {
    const int error = errno;
    return means_unsupported(error) ? error_code(errc::raw_packet_unsupported) : from_errno();
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = port_;
  if (int ret = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE | IBV_QP_PORT))
    return from_returned_errno(ret);
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  if (int ret = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE))
    return from_returned_errno(ret);
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  if (int ret = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE))
    return from_returned_errno(ret);

  // Registered once, for the socket's lifetime.
  receive_count_ = static_cast<std::uint32_t>(options.receive_buffers);
  const std::size_t total = options.receive_buffers + options.send_buffers;
  if (auto ec = memory_.allocate(pd_.get(), total, options.max_packet_size, IBV_ACCESS_LOCAL_WRITE))
    return ec;

  receive_sges_.resize(options.receive_buffers);
  receive_wrs_.resize(options.receive_buffers);
  for (std::uint32_t i = 0; i < receive_count_; ++i) {
    receive_sges_[i] = {reinterpret_cast<std::uint64_t>(buffer(i)),
                        static_cast<std::uint32_t>(options.max_packet_size), memory_.mr->lkey};
    receive_wrs_[i] = {};
    receive_wrs_[i].wr_id = i;
    receive_wrs_[i].sg_list = &receive_sges_[i];
    receive_wrs_[i].num_sge = 1;
    receive_wrs_[i].next = i + 1 < receive_count_ ? &receive_wrs_[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (int ret = ibv_post_recv(qp_.get(), &receive_wrs_[0], &bad))
    return from_returned_errno(ret);

  send_sges_.resize(options.send_buffers);
  send_wrs_.resize(options.send_buffers);
  free_send_.resize(options.send_buffers);
  for (std::uint32_t i = 0; i < options.send_buffers; ++i) {
    const std::uint32_t id = receive_count_ + i;
    send_sges_[i] = {reinterpret_cast<std::uint64_t>(buffer(id)), 0, memory_.mr->lkey};
    send_wrs_[i] = {};
    send_wrs_[i].wr_id = id;
    send_wrs_[i].sg_list = &send_sges_[i];
    send_wrs_[i].num_sge = 1;
    send_wrs_[i].opcode = IBV_WR_SEND;
    send_wrs_[i].send_flags = IBV_SEND_SIGNALED;
    free_send_[i] = static_cast<std::uint32_t>(id);
  }
  completions_.resize(std::max<std::size_t>(16, std::min<std::size_t>(256, total)));
  return {};
}

void verbs_backend::shutdown() noexcept {
  flows_.clear();
  qp_.reset();
  receive_.reset();
  send_.reset();
  memory_.mr.reset();
  pd_.reset();
  context_.reset();
  // memory_.memory stays: lent packets may still point into it.
}

std::size_t verbs_backend::poll_receive(std::span<received_packet> out, error_code& ec) noexcept {
  ec = std::exchange(receive_error_, {});
  if (ec)
    return 0;
  if (!qp_) {
    ec = boost::asio::error::bad_descriptor;
    return 0;
  }
  std::size_t n = 0;
  ibv_recv_wr* repost = nullptr; // failed completions: their buffers go straight back
  while (n < out.size()) {
    const int want = static_cast<int>(std::min(out.size() - n, completions_.size()));
    const int got = ibv_poll_cq(receive_.cq.get(), want, completions_.data());
    if (got < 0) {
      ec = from_negative_count(got);
      break;
    }
    for (int i = 0; i < got; ++i) {
      const ibv_wc& wc = completions_[i];
      const auto id = static_cast<std::uint32_t>(wc.wr_id);
      if (wc.status != IBV_WC_SUCCESS) {
        if (n == 0 && !ec)
          ec = make_wc_error(wc.status);
        receive_wrs_[id].next = repost;
        repost = &receive_wrs_[id];
        continue;
      }
      received_packet& packet = out[n++];
      std::byte* data = buffer(id);
      packet.data = std::span<std::byte>(data, wc.byte_len);
      packet.wire_length = wc.byte_len;
      packet.timestamp = {};
      // The tag stays in the data; report it like the packet backend does.
      if (wc.byte_len >= 18 && data[12] == std::byte{0x81} && data[13] == std::byte{0x00})
        packet.vlan_tci = static_cast<std::uint16_t>(std::to_integer<unsigned>(data[14]) << 8 |
                                                     std::to_integer<unsigned>(data[15]));
      else
        packet.vlan_tci.reset();
      raw_packet_access::set_id(packet, id);
    }
    if (got < want)
      break;
  }
  if (repost) {
    ibv_recv_wr* bad = nullptr;
    if (int ret = ibv_post_recv(qp_.get(), repost, &bad))
      receive_error_ = from_returned_errno(ret);
  }
  if (n > 0)
    ec = {};
  statistics_.received += n;
  return n;
}

wait_plan verbs_backend::receive_wait_plan(error_code& ec) noexcept {
  ec = {};
  return receive_.plan(ec);
}

void verbs_backend::on_receive_ready() noexcept {
  receive_.on_ready();
}

void verbs_backend::release(std::span<const received_packet> packets) noexcept {
  if (!qp_ || packets.empty())
    return;
  for (std::size_t i = 0; i < packets.size(); ++i)
    receive_wrs_[raw_packet_access::id(packets[i])].next =
        i + 1 < packets.size() ? &receive_wrs_[raw_packet_access::id(packets[i + 1])] : nullptr;
  ibv_recv_wr* bad = nullptr;
  if (int ret = ibv_post_recv(qp_.get(), &receive_wrs_[raw_packet_access::id(packets[0])], &bad))
    receive_error_ = from_returned_errno(ret);
}

std::size_t verbs_backend::acquire(std::span<send_packet> out) noexcept {
  const std::size_t n = std::min(out.size(), free_send_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t id = free_send_.back();
    free_send_.pop_back();
    out[i] = raw_packet_access::lend(std::span<std::byte>(buffer(id), caps_.max_packet_size), id);
  }
  return n;
}

void verbs_backend::give_back(std::span<const send_packet> packets) noexcept {
  for (const auto& packet : packets)
    free_send_.push_back(raw_packet_access::id(packet));
}

std::size_t verbs_backend::post(std::span<const send_packet> packets, error_code& ec) noexcept {
  ec = {};
  if (!qp_) {
    ec = boost::asio::error::bad_descriptor;
    return 0;
  }
  if (packets.empty())
    return 0;
  auto wr = [this](std::uint32_t id) -> ibv_send_wr& { return send_wrs_[id - receive_count_]; };
  for (std::size_t i = 0; i < packets.size(); ++i) {
    ibv_send_wr& request = wr(raw_packet_access::id(packets[i]));
    request.sg_list->length = static_cast<std::uint32_t>(packets[i].length);
    request.next = i + 1 < packets.size() ? &wr(raw_packet_access::id(packets[i + 1])) : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  std::size_t posted = packets.size();
  if (int ret = ibv_post_send(qp_.get(), &wr(raw_packet_access::id(packets[0])), &bad)) {
    ec = from_returned_errno(ret);
    posted = 0;
    for (std::size_t i = 0; i < packets.size() && &wr(raw_packet_access::id(packets[i])) != bad; ++i)
      posted = i + 1;
    // The unposted ones stay with the caller, who gives them back.
  }
  in_flight_ += posted;
  statistics_.sent += posted;
  return posted;
}

bool verbs_backend::poll_sent(error_code& ec) noexcept {
  ec = std::exchange(send_error_, {});
  if (!qp_)
    return true;
  for (;;) {
    const int got =
        ibv_poll_cq(send_.cq.get(), static_cast<int>(completions_.size()), completions_.data());
    if (got < 0) {
      ec = from_negative_count(got);
      break;
    }
    for (int i = 0; i < got; ++i) {
      const ibv_wc& wc = completions_[i];
      free_send_.push_back(static_cast<std::uint32_t>(wc.wr_id));
      --in_flight_;
      if (wc.status != IBV_WC_SUCCESS && !ec)
        ec = make_wc_error(wc.status);
    }
    if (got < static_cast<int>(completions_.size()))
      break;
  }
  return in_flight_ == 0;
}

wait_plan verbs_backend::send_wait_plan(bool blocked, bool flushing, error_code& ec) noexcept {
  ec = {};
  if (in_flight_ == 0 || !(blocked || flushing))
    return {};
  return send_.plan(ec);
}

void verbs_backend::on_send_ready() noexcept {
  send_.on_ready();
}

error_code verbs_backend::set_flow(std::size_t index, const flow_rule& rule) noexcept {
  if (!qp_)
    return boost::asio::error::bad_descriptor;
  try {
    auto attr = build_verbs_flow(rule, port_);
    flow_ptr flow(ibv_create_flow(qp_.get(), attr.get()));
    if (!flow) {
      const int error = errno;
      return error == EOPNOTSUPP || error == ENOSYS ? error_code(errc::raw_packet_unsupported)
                                                    : from_errno();
    }
    flows_[index] = std::move(flow); // the old rule goes after the new one is in place
    return {};
  } catch (const std::bad_alloc&) {
    return error_code(ENOMEM, boost::system::system_category());
  }
}

error_code verbs_backend::clear_flow(std::size_t index) noexcept {
  if (!qp_)
    return boost::asio::error::bad_descriptor;
  if (flows_[index]) {
    if (int ret = ibv_destroy_flow(flows_[index].get()))
      return from_returned_errno(ret);
    (void)flows_[index].release();
  }
  return {};
}

} // namespace

std::unique_ptr<backend> open_verbs_backend(const interface_info& interface,
                                            const raw_socket_options& options, error_code& ec) {
  auto self = std::make_unique<verbs_backend>();
  ec = self->setup(interface, options);
  if (ec)
    return nullptr;
  return self;
}

} // namespace asio_rdma::detail
