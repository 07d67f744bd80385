// The state behind a datagram_socket: one UD queue pair on a bound rdma_cm
// UDP id that answers peers' SIDR requests, its completion queue, the
// library's receive buffers and send slots, and the address handle cache.
#pragma once

#include "async/completion_queue.hpp"
#include "cm/cm_channel.hpp"
#include "verbs/receive_ring.hpp"
#include "verbs/device.hpp"
#include "verbs/handles.hpp"

#include <asio_rdma/datagram_socket.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/circular_buffer.hpp>

#include <algorithm>

#include <map>
#include <optional>
#include <vector>

namespace asio_rdma::detail {

/// An ibv_ah shared by the endpoints that use it; keeps its PD's device alive.
struct address_handle {
  std::shared_ptr<device> owner;
  ah_ptr ah; // destroyed before `owner` lets the device go
};

/// A first-in first-out ring (boost::circular_buffer) that grows when full and never
/// shrinks, so the steady state allocates nothing.
template <typename T> class growing_queue {
public:
  bool empty() const { return ring_.empty(); }
  std::size_t size() const { return ring_.size(); }
  T& front() { return ring_.front(); }
  T& at(std::size_t i) { return ring_[i]; }
  void push(T item) {
    if (ring_.full())
      ring_.set_capacity(std::max<std::size_t>(8, ring_.capacity() * 2));
    ring_.push_back(std::move(item));
  }
  T pop() {
    T item(std::move(ring_.front()));
    ring_.pop_front();
    return item;
  }
  void reserve(std::size_t n) {
    if (ring_.capacity() < n)
      ring_.set_capacity(n);
  }

private:
  boost::circular_buffer<T> ring_;
};

class datagram_resolver;

class datagram_impl final : public std::enable_shared_from_this<datagram_impl>, public cm_event_target {
public:
  explicit datagram_impl(const asio::any_io_executor& ex) : ex_(ex) {}
  ~datagram_impl();

  error_code open(std::string_view address, std::uint16_t port, const datagram_options& options);
  void close() noexcept;

  void on_cm_event(const cm_event& event) override;

  void resolve(std::string host, std::uint16_t port, endpoint_operation&& pending);
  void send(const buffer_view<boost::asio::const_buffer>& buffers, const datagram_endpoint& peer,
            pending_operation<void(error_code, std::size_t)>&& pending);
  void receive(const buffer_view<boost::asio::mutable_buffer>& buffers,
               datagram_receive_operation&& pending);

  void join(std::string group, endpoint_operation&& pending);
  error_code leave(std::string_view group);

  std::uint16_t local_port() const;
  datagram_endpoint local_endpoint() const;
  std::size_t max_message_size() const { return mtu_; }
  ibv_qp* qp() const { return id_ ? id_->qp : nullptr; }
  rdma_cm_id* cm_id() const { return id_.get(); }
  const asio::any_io_executor& executor() const { return ex_; }

  // Used by the resolver.
  cm_channel& channel() { return *channel_; }
  const std::shared_ptr<device>& dev() const { return device_; }
  const sockaddr* bound_address() const;
  std::uint32_t resolve_timeout_ms() const { return options_.resolve_timeout_ms; }
  void forget(datagram_resolver* r);

private:
  struct send_slot : completion_target {
    datagram_impl* owner = nullptr;
    std::uint32_t index = 0;
    std::size_t bytes = 0;
    std::shared_ptr<address_handle> handle; // alive while the WR is posted
    pending_operation<void(error_code, std::size_t)> handler;
  };
  // A send beyond send_depth in flight: a copy of its bytes (the caller may reuse its
  // buffers at once) in a staging buffer of mtu_ bytes, taken from spare_staging_ and
  // given back when the send takes a slot: no allocation once the queue has been as long.
  struct queued_send {
    std::unique_ptr<std::byte[]> data;
    std::size_t size = 0;
    datagram_endpoint peer;
    pending_operation<void(error_code, std::size_t)> handler;
  };
  struct arrival {
    std::uint32_t slot = 0;
    std::uint32_t bytes = 0; // payload, without the GRH area
    std::uint32_t source_qp = 0;
  };
  struct waiting_receive {
    std::uint64_t id = 0;
    mutable_buffer_array buffers;
    datagram_receive_operation handler;
  };

  // One multicast group: its own rdma_cm id (the socket's id listens and
  // cannot join); the queue pair is attached to the group's GID once joined.
  struct group {
    cm_id_ptr id;
    sockaddr_storage address{};
    boost::asio::ip::address ip;
    endpoint_operation handler; // while joining
    bool attached = false;
    ibv_gid mgid{};
    std::uint16_t mlid = 0;
  };
  void on_group_event(group& g, const cm_event& ev);
  void detach(group& g);

  static void on_send_complete(completion_target* target, const ibv_wc& wc, from origin);
  static void on_receive_complete(completion_target* target, const ibv_wc& wc, from origin);
  void deliver(from origin);
  void cancel_receive(std::uint64_t id);
  void post_send(send_slot& slot, std::span<const std::byte> data, ibv_ah* ah,
                 const datagram_endpoint& peer);
  std::shared_ptr<address_handle> handle_for(const datagram_endpoint& peer, error_code& ec);
  datagram_endpoint sender_of(const arrival& a) const;
  void repost();

  asio::any_io_executor ex_;
  datagram_options options_;
  std::shared_ptr<cm_channel> channel_;
  std::shared_ptr<device> device_;
  std::shared_ptr<completion_queue> cq_;
  receive_ring ring_;
  registered_block send_block_;
  cm_id_ptr id_; // the bound, listening id that owns the queue pair
  bool qp_created_ = false;
  bool open_ = false;
  bool closing_ = false;
  std::uint8_t port_num_ = 0;
  int sgid_index_ = 0;
  std::uint32_t mtu_ = 0;

  std::vector<send_slot> send_slots_;
  std::vector<std::uint32_t> free_send_slots_;
  growing_queue<queued_send> queued_sends_;
  std::vector<std::unique_ptr<std::byte[]>> spare_staging_;
  growing_queue<arrival> arrived_;
  growing_queue<waiting_receive> waiting_;
  std::uint64_t next_receive_id_ = 1;
  std::uint32_t posted_sends_ = 0;
  // Reply address handles by peer GID (created on the first reply only).
  std::map<std::array<std::uint8_t, 16>, std::shared_ptr<address_handle>> replies_;
  std::vector<std::shared_ptr<datagram_resolver>> resolvers_;
  std::vector<std::unique_ptr<group>> groups_;
};

} // namespace asio_rdma::detail
