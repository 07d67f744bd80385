// Multicast groups of a datagram socket: join, the group's rdma_cm events,
// leave.
#include "ud/datagram_impl.hpp"
#include "ud/ud_addressing.hpp"

#include "verbs/verbs_error.hpp"

#include <boost/asio/ip/address.hpp>

namespace asio_rdma::detail {

void datagram_impl::join(std::string text, endpoint_operation&& pending) {
  auto fail = [&](error_code ec) { pending.complete(ex_, from::user_call, ec, datagram_endpoint()); };
  error_code ec;
  auto g = std::make_unique<group>();
  g->ip = boost::asio::ip::make_address(text, ec);
  if (ec || !g->ip.is_multicast() || !make_sockaddr(text, 0, g->address))
    return fail(boost::asio::error::invalid_argument);
  for (const auto& other : groups_)
    if (other->ip == g->ip)
      return fail(boost::asio::error::already_connected);
  g->id = channel_->create_id(this, RDMA_PS_UDP, ec);
  if (ec)
    return fail(ec);
  auto src = ephemeral(bound_address());
  if (::rdma_bind_addr(g->id.get(), reinterpret_cast<sockaddr*>(&src)) != 0)
    return fail(from_errno());
  if (::rdma_join_multicast(g->id.get(), reinterpret_cast<sockaddr*>(&g->address), g.get()) != 0)
    return fail(from_errno());
  g->handler = std::move(pending);
  groups_.push_back(std::move(g));
}

void datagram_impl::on_group_event(group& g, const cm_event& ev) {
  auto remove = [&] {
    for (auto it = groups_.begin(); it != groups_.end(); ++it)
      if (it->get() == &g) {
        groups_.erase(it); // its id goes too: its events are acknowledged
        return;
      }
  };
  if (!g.handler)
    return; // joined already: later events (errors) change nothing we can report
  if (ev.type != RDMA_CM_EVENT_MULTICAST_JOIN) {
    if (ev.type == RDMA_CM_EVENT_MULTICAST_ERROR || ev.type == RDMA_CM_EVENT_ADDR_ERROR ||
        ev.type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      g.handler.complete(ex_, from::user_call, from_event_status(ev.status), datagram_endpoint());
      remove();
    }
    return;
  }
  ibv_ah_attr attr = ev.ud_ah_attr;
  g.mgid = attr.grh.dgid;
  g.mlid = attr.dlid;
  error_code ec;
  // librdmacm attaches only a queue pair that lives on the joining id; ours
  // lives on the listening id, so attach it here (and detach on leave).
  if (int rc = ::ibv_attach_mcast(id_->qp, &g.mgid, g.mlid))
    ec = from_returned_errno(rc);
  else
    g.attached = true;
  auto handle = std::make_shared<address_handle>();
  handle->owner = device_;
  if (!ec) {
    handle->ah.reset(::ibv_create_ah(device_->pd.get(), &attr));
    if (!handle->ah)
      ec = from_errno();
  }
  if (ec) {
    detach(g);
    ::rdma_leave_multicast(g.id.get(), reinterpret_cast<sockaddr*>(&g.address));
    g.handler.complete(ex_, from::user_call, ec, datagram_endpoint());
    return remove();
  }
  datagram_endpoint ep;
  ep.address = g.ip;
  ep.qp_num = ev.ud_qp_num;
  ep.qkey = ev.ud_qkey;
  std::memcpy(ep.gid.data(), g.mgid.raw, 16);
  ep.handle = std::move(handle);
  g.handler.complete(ex_, from::user_call, error_code(), std::move(ep));
}

void datagram_impl::detach(group& g) {
  if (g.attached && id_ && id_->qp)
    ::ibv_detach_mcast(id_->qp, &g.mgid, g.mlid);
  g.attached = false;
}

error_code datagram_impl::leave(std::string_view text) {
  error_code ec;
  const auto ip = boost::asio::ip::make_address(std::string(text), ec);
  if (ec)
    return boost::asio::error::invalid_argument;
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    auto& g = **it;
    if (g.ip != ip)
      continue;
    if (g.handler)
      g.handler.complete(ex_, from::user_call, error_code(boost::asio::error::operation_aborted),
                   datagram_endpoint());
    detach(g);
    if (::rdma_leave_multicast(g.id.get(), reinterpret_cast<sockaddr*>(&g.address)) != 0)
      ec = from_errno();
    groups_.erase(it);
    return ec;
  }
  return boost::asio::error::not_found;
}

} // namespace asio_rdma::detail
