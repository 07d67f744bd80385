#include "ud/datagram_impl.hpp"
#include "ud/datagram_resolver.hpp"
#include "ud/ud_addressing.hpp"

#include "error_message.hpp"
#include "verbs/gid_table.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>

#include <arpa/inet.h>

#include <cstring>
#include <string>

namespace asio_rdma::detail {

datagram_impl::~datagram_impl() {
  close();
}

namespace {

// The name of the iWARP device that has `address`, or "" if it is no iWARP device's: a
// TCP id bound there finds its device (a UDP id, which a datagram socket needs, cannot
// be made on iWARP at all).
std::string iwarp_device_at(const sockaddr_storage& address) {
  rdma_cm_id* probe = nullptr;
  if (::rdma_create_id(nullptr, &probe, nullptr, RDMA_PS_TCP) != 0)
    return {};
  sockaddr_storage copy = address; // any port: the socket's may be an RC listener's too
  if (copy.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in&>(copy).sin_port = 0;
  else
    reinterpret_cast<sockaddr_in6&>(copy).sin6_port = 0;
  std::string name;
  if (::rdma_bind_addr(probe, reinterpret_cast<sockaddr*>(&copy)) == 0 && probe->verbs &&
      probe->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
    name = ::ibv_get_device_name(probe->verbs->device);
  ::rdma_destroy_id(probe);
  return name;
}

} // namespace

error_code datagram_impl::open(std::string_view address, std::uint16_t port,
                               const datagram_options& options) {
  if (options.receive_depth < 1 || options.receive_depth > 65536 || options.send_depth < 1 ||
      options.send_depth > 65536 || options.resolve_timeout_ms < 1)
    return errc::invalid_option;
  options_ = options;
  sockaddr_storage local{};
  if (!make_sockaddr(address, port, local))
    return boost::asio::error::invalid_argument;
  // iWARP has no datagrams (rdma_cm would say only EOPNOTSUPP).
  if (auto iwarp = iwarp_device_at(local); !iwarp.empty())
    return with_message(errc::operation_not_supported,
                        iwarp + " is an iWARP device: iWARP has no unreliable datagrams, so no "
                                "datagram socket and no multicast");
  error_code ec;
  channel_ = cm_channel::create(ex_, ec);
  if (ec)
    return ec;
  id_ = channel_->create_id(this, RDMA_PS_UDP, ec);
  if (ec)
    return ec;
  if (::rdma_bind_addr(id_.get(), reinterpret_cast<sockaddr*>(&local)) != 0)
    return from_errno();
  if (!id_->verbs)
    return errc::no_device; // bound to an address no RDMA device has
  port_num_ = id_->port_num;
  ibv_port_attr port_attr{};
  if (int rc = ::ibv_query_port(id_->verbs, port_num_, &port_attr))
    return from_returned_errno(rc);
  mtu_ = 128u << port_attr.active_mtu;
  // The GID of the bound address: the source of reply address handles.
  const auto own_gid = mapped_gid(address_of(reinterpret_cast<sockaddr*>(&local)));
  sgid_index_ = 0; // unless the table has the address's entry
  if ((ec = for_each_gid(id_->verbs, port_num_, port_attr.gid_tbl_len, port_attr.link_layer,
                         [&](const ibv_gid_entry& entry) {
                           const bool own = std::memcmp(entry.gid.raw, own_gid.data(), 16) == 0 &&
                                            (entry.gid_type == IBV_GID_TYPE_ROCE_V2 ||
                                             entry.gid_type == IBV_GID_TYPE_IB);
                           if (own)
                             sgid_index_ = static_cast<int>(entry.gid_index);
                           return !own;
                         })))
    return ec;

  device_ = get_device(id_->verbs, ec);
  if (ec)
    return ec;
  const int entries = static_cast<int>(options.receive_depth + options.send_depth);
  cq_ = completion_queue::create(ex_, id_->verbs, entries, ec);
  if (ec)
    return ec;
  cq_->attach(weak_from_this());
  cq_->set_mode(options.completion_mode, options.adaptive_spin);
  if ((ec = ring_.init(device_->pd.get(), options.receive_depth, mtu_ + grh_bytes,
                       &datagram_impl::on_receive_complete, this)))
    return ec;
  if ((ec = send_block_.allocate(device_->pd.get(), options.send_depth, mtu_, 0)))
    return ec;
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_->native();
  attr.recv_cq = cq_->native();
  attr.qp_type = IBV_QPT_UD;
  attr.cap.max_send_wr = options.send_depth;
  attr.cap.max_recv_wr = options.receive_depth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (::rdma_create_qp(id_.get(), device_->pd.get(), &attr) != 0)
    return from_errno();
  qp_created_ = true;
  send_slots_.resize(options.send_depth);
  free_send_slots_.reserve(options.send_depth);
  for (std::uint32_t i = options.send_depth; i > 0; --i) {
    auto& s = send_slots_[i - 1];
    s.on_complete = &datagram_impl::on_send_complete;
    s.owner = this;
    s.index = i - 1;
    free_send_slots_.push_back(i - 1);
  }
  arrived_.reserve(options.receive_depth);
  waiting_.reserve(16);
  if ((ec = ring_.post_to(id_->qp)))
    return ec;
  if ((ec = cq_->arm()))
    return ec;
  // Peers resolve this socket with SIDR requests to the listening id.
  if (::rdma_listen(id_.get(), 128) != 0)
    return from_errno();
  channel_->add_interest();
  open_ = true;
  return {};
}

void datagram_impl::close() noexcept {
  if (!id_ && !channel_)
    return;
  auto keep_alive = weak_from_this().lock(); // handlers below may drop the socket
  closing_ = true;                           // so flushed sends post their handlers
  const error_code aborted = boost::asio::error::operation_aborted;
  while (!waiting_.empty()) {
    auto w = waiting_.pop();
    if (w.handler) {
      cq_->remove_interest();
      w.handler.complete(ex_, from::user_call, aborted, std::size_t(0), datagram_endpoint());
    }
  }
  while (!queued_sends_.empty()) {
    auto q = queued_sends_.pop();
    q.handler.complete(ex_, from::user_call, aborted, std::size_t(0));
  }
  auto resolvers = std::move(resolvers_);
  for (auto& r : resolvers)
    r->finish(aborted, {});
  for (auto& g : groups_) {
    if (g->handler)
      g->handler.complete(ex_, from::user_call, aborted, datagram_endpoint());
    detach(*g);
    if (g->id)
      ::rdma_leave_multicast(g->id.get(), reinterpret_cast<sockaddr*>(&g->address));
  }
  groups_.clear();
  if (qp_created_ && posted_sends_ > 0) {
    // Sends still posted: one poll reports those the device has finished (from inside a
    // poll it finds nothing: that poll dispatches them), then destroying the queue pair
    // below ends the device's use of the send slots at once. Nothing waits for a flush,
    // so close() never blocks the I/O thread. The other sends complete aborted; a
    // completion of theirs still on its way finds no handler (on_send_complete).
    cq_->poll();
    for (auto& s : send_slots_)
      if (s.handler)
        s.handler.complete(ex_, from::user_call, aborted, std::size_t(0));
  }
  if (open_)
    channel_->remove_interest();
  open_ = false;
  if (cq_)
    cq_->stop();
  if (qp_created_)
    ::rdma_destroy_qp(id_.get());
  qp_created_ = false;
  id_.reset();
  replies_.clear();
  channel_.reset();
}

const sockaddr* datagram_impl::bound_address() const {
  return rdma_get_local_addr(id_.get());
}

std::uint16_t datagram_impl::local_port() const {
  return id_ ? ntohs(rdma_get_src_port(id_.get())) : 0;
}

datagram_endpoint datagram_impl::local_endpoint() const {
  datagram_endpoint ep;
  if (!id_)
    return ep;
  ep.address = address_of(bound_address());
  ep.gid = mapped_gid(ep.address);
  ep.qp_num = id_->qp ? id_->qp->qp_num : 0;
  ep.qkey = udp_qkey;
  return ep;
}
void datagram_impl::forget(datagram_resolver* r) {
  // Destroyed later: r is still running its own finish().
  for (auto it = resolvers_.begin(); it != resolvers_.end(); ++it)
    if (it->get() == r) {
      boost::asio::post(ex_, [doomed = std::move(*it)] {});
      resolvers_.erase(it);
      return;
    }
}


void datagram_impl::on_cm_event(const cm_event& ev) {
  for (auto& g : groups_)
    if (g->id.get() == ev.id)
      return on_group_event(*g, ev);
  if (ev.type != RDMA_CM_EVENT_CONNECT_REQUEST || !id_ || !id_->qp)
    return;
  // A peer resolves this socket: answer with our queue pair; the request's
  // own id is not needed afterwards (UD has no connection).
  rdma_conn_param param{};
  param.qp_num = id_->qp->qp_num;
  if (::rdma_accept(ev.id, &param) != 0)
    ::rdma_reject(ev.id, nullptr, 0);
  ::rdma_destroy_id(ev.id);
}
void datagram_impl::resolve(std::string host, std::uint16_t port, endpoint_operation&& pending) {
  auto r = std::make_shared<datagram_resolver>(*this, ex_, std::move(pending));
  resolvers_.push_back(r);
  r->start(host, port);
}

std::shared_ptr<address_handle> datagram_impl::handle_for(const datagram_endpoint& peer,
                                                          error_code& ec) {
  if (peer.handle)
    return peer.handle;
  // A received sender: one handle per GID, created on the first reply.
  auto& cached = replies_[peer.gid];
  if (cached)
    return cached;
  ibv_ah_attr attr{};
  attr.is_global = 1;
  std::memcpy(attr.grh.dgid.raw, peer.gid.data(), 16);
  attr.grh.sgid_index = static_cast<std::uint8_t>(sgid_index_);
  attr.grh.hop_limit = 64;
  attr.port_num = port_num_;
  auto handle = std::make_shared<address_handle>();
  handle->owner = device_;
  handle->ah.reset(::ibv_create_ah(device_->pd.get(), &attr));
  if (!handle->ah) {
    ec = from_errno();
    replies_.erase(peer.gid);
    return nullptr;
  }
  cached = handle;
  return handle;
}

void datagram_impl::send(const buffer_view<boost::asio::const_buffer>& b, const datagram_endpoint& peer,
                         pending_operation<void(error_code, std::size_t)>&& pending) {
  if (b.too_many)
    return pending.complete(ex_, from::user_call, error_code(boost::asio::error::invalid_argument),
                        std::size_t(0));
  if (b.total_size > mtu_)
    return pending.complete(ex_, from::user_call, error_code(errc::message_too_large),
                        std::size_t(0));
  if (peer.qp_num == 0)
    return pending.complete(ex_, from::user_call, error_code(boost::asio::error::invalid_argument),
                        std::size_t(0));
  if (free_send_slots_.empty() && queued_sends_.empty())
    cq_->poll(); // completed sends give their slots back
  if (free_send_slots_.empty() || !queued_sends_.empty()) {
    // Beyond send_depth in flight: keep a copy and send in order later.
    queued_send q;
    if (spare_staging_.empty()) {
      q.data = std::make_unique_for_overwrite<std::byte[]>(mtu_);
    } else {
      q.data = std::move(spare_staging_.back());
      spare_staging_.pop_back();
    }
    q.size = boost::asio::buffer_copy(boost::asio::buffer(q.data.get(), mtu_),
                                      std::span(b.items, b.count));
    q.peer = peer;
    q.handler = std::move(pending);
    queued_sends_.push(std::move(q));
    return;
  }
  error_code ec;
  auto handle = handle_for(peer, ec);
  if (ec)
    return pending.complete(ex_, from::user_call, ec, std::size_t(0));
  auto& slot = send_slots_[free_send_slots_.back()];
  free_send_slots_.pop_back();
  std::byte* data = send_block_.slot(slot.index);
  boost::asio::buffer_copy(boost::asio::buffer(data, mtu_), std::span(b.items, b.count));
  slot.handler = std::move(pending);
  slot.handle = std::move(handle);
  post_send(slot, {data, b.total_size}, slot.handle->ah.get(), peer);
}

void datagram_impl::post_send(send_slot& slot, std::span<const std::byte> data, ibv_ah* ah,
                              const datagram_endpoint& peer) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(data.data()),
              static_cast<std::uint32_t>(data.size()), send_block_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = slot.wr_id();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = peer.qp_num;
  wr.wr.ud.remote_qkey = peer.qkey ? peer.qkey : udp_qkey;
  slot.bytes = data.size();
  ibv_send_wr* bad = nullptr;
  if (int rc = ::ibv_post_send(id_->qp, &wr, &bad)) {
    slot.handle.reset();
    free_send_slots_.push_back(slot.index);
    return slot.handler.complete(ex_, from::user_call, from_returned_errno(rc), std::size_t(0));
  }
  ++posted_sends_;
  cq_->add_interest();
}

void datagram_impl::on_send_complete(completion_target* target, const ibv_wc& wc,
                                     from origin) {
  auto& slot = *static_cast<send_slot*>(target);
  auto& self = *slot.owner;
  --self.posted_sends_;
  self.cq_->remove_interest();
  slot.handle.reset();
  auto handler = std::move(slot.handler);
  self.free_send_slots_.push_back(slot.index);
  // Queued sends take the slot before the handler can initiate more.
  while (!self.queued_sends_.empty() && !self.free_send_slots_.empty() && self.open_) {
    auto q = self.queued_sends_.pop();
    error_code ec;
    auto handle = self.handle_for(q.peer, ec);
    self.spare_staging_.push_back(std::move(q.data)); // copied out below, or failed
    if (ec) {
      q.handler.complete(self.ex_, from::user_call, ec, std::size_t(0));
      continue;
    }
    auto& next = self.send_slots_[self.free_send_slots_.back()];
    self.free_send_slots_.pop_back();
    std::byte* data = self.send_block_.slot(next.index);
    std::memcpy(data, self.spare_staging_.back().get(), q.size);
    next.handler = std::move(q.handler);
    next.handle = std::move(handle);
    self.post_send(next, {data, q.size}, next.handle->ah.get(), q.peer);
  }
  if (!handler)
    return;
  error_code ec;
  if (wc.status == IBV_WC_WR_FLUSH_ERR)
    ec = boost::asio::error::operation_aborted;
  else if (wc.status != IBV_WC_SUCCESS)
    ec = make_wc_error(wc.status);
  // close() flushes the posted sends from inside its own call: theirs are posted.
  handler.complete(self.ex_, self.closing_ ? from::user_call : origin, ec,
                   ec ? std::size_t(0) : slot.bytes);
}

void datagram_impl::on_receive_complete(completion_target* target, const ibv_wc& wc,
                                        from origin) {
  auto& slot = *static_cast<receive_slot*>(target);
  auto& self = *static_cast<datagram_impl*>(slot.owner);
  if (wc.status != IBV_WC_SUCCESS) {
    if (self.open_ && wc.status != IBV_WC_WR_FLUSH_ERR) {
      self.ring_.release(slot.index); // a bad datagram is dropped, the buffer reused
      self.repost();
    }
    return;
  }
  const std::uint32_t bytes = wc.byte_len > grh_bytes ? wc.byte_len - grh_bytes : 0;
  self.arrived_.push({slot.index, bytes, wc.src_qp});
  self.deliver(origin);
}

datagram_endpoint datagram_impl::sender_of(const arrival& a) const {
  const std::byte* grh = ring_.slot(a.slot);
  datagram_endpoint ep;
  ep.qp_num = a.source_qp;
  ep.qkey = udp_qkey;
  const auto* g = reinterpret_cast<const std::uint8_t*>(grh);
  if ((g[20] >> 4) == 4) {
    // RoCE v2 over IPv4: the IPv4 header's source address.
    ep.gid[10] = ep.gid[11] = 0xff;
    std::memcpy(ep.gid.data() + 12, g + 20 + 12, 4);
  } else {
    std::memcpy(ep.gid.data(), g + 8, 16); // the GRH's source GID
  }
  ep.address = address_of(ep.gid);
  return ep;
}

void datagram_impl::repost() {
  if (open_ && ring_.has_released())
    ring_.post_to(id_->qp);
}

void datagram_impl::deliver(from origin) {
  while (!waiting_.empty() && !arrived_.empty()) {
    auto& w = waiting_.front();
    if (!w.handler) { // cancelled
      waiting_.pop();
      continue;
    }
    auto a = arrived_.front();
    if (w.buffers.total_size < a.bytes) {
      auto done = waiting_.pop();
      cq_->remove_interest();
      done.handler.complete(ex_, origin, error_code(errc::buffer_too_small),
                            std::size_t(0), datagram_endpoint());
      continue; // the datagram stays queued
    }
    arrived_.pop();
    auto done = waiting_.pop();
    const std::byte* payload = ring_.slot(a.slot) + grh_bytes;
    boost::asio::buffer_copy(std::span(done.buffers.items.data(), done.buffers.count),
                             boost::asio::buffer(payload, a.bytes));
    auto sender = sender_of(a);
    ring_.release(a.slot);
    repost();
    cq_->remove_interest();
    done.handler.complete(ex_, origin, error_code(), std::size_t(a.bytes), std::move(sender));
  }
}

void datagram_impl::receive(const buffer_view<boost::asio::mutable_buffer>& b,
                            datagram_receive_operation&& pending) {
  if (b.too_many)
    return pending.complete(ex_, from::user_call, error_code(boost::asio::error::invalid_argument),
                        std::size_t(0), datagram_endpoint());
  cq_->add_interest();
  if (waiting_.empty() && !arrived_.empty()) {
    // Already here: complete through a post, never inside the initiation.
    auto a = arrived_.front();
    if (b.total_size < a.bytes) {
      cq_->remove_interest();
      return pending.complete(ex_, from::user_call, error_code(errc::buffer_too_small),
                          std::size_t(0), datagram_endpoint());
    }
    arrived_.pop();
    boost::asio::buffer_copy(std::span(b.items, b.count),
                             boost::asio::buffer(ring_.slot(a.slot) + grh_bytes, a.bytes));
    auto sender = sender_of(a);
    ring_.release(a.slot);
    repost();
    cq_->remove_interest();
    return pending.complete(ex_, from::user_call, error_code(), std::size_t(a.bytes),
                        std::move(sender));
  }
  const std::uint64_t id = next_receive_id_++;
  waiting_receive w{id, {}, std::move(pending)};
  w.handler.on_cancel([weak = weak_from_this(), id](boost::asio::cancellation_type) {
    if (auto self = weak.lock())
      self->cancel_receive(id);
  });
  w.buffers.assign(b); // the caller's view lives only as long as this call
  waiting_.push(std::move(w));
}

void datagram_impl::cancel_receive(std::uint64_t id) {
  for (std::size_t i = 0; i < waiting_.size(); ++i) {
    auto& w = waiting_.at(i);
    if (w.id == id && w.handler) {
      cq_->remove_interest();
      w.handler.complete(ex_, from::user_call, error_code(boost::asio::error::operation_aborted),
                         std::size_t(0), datagram_endpoint());
      return;
    }
  }
}

} // namespace asio_rdma::detail
