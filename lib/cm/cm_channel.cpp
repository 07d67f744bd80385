#include "cm/cm_channel.hpp"

#include "trace.hpp"
#include "verbs/verbs_error.hpp"

#include <algorithm>
#include <cstring>
#include <fcntl.h>

namespace asio_rdma::detail {

std::shared_ptr<cm_channel> cm_channel::create(const asio::any_io_executor& ex, error_code& ec) {
  event_channel_ptr channel(::rdma_create_event_channel());
  if (!channel) {
    ec = from_errno();
    return nullptr;
  }
  if ((ec = set_nonblocking(channel->fd)))
    return nullptr;
  ec = {};
  return std::make_shared<cm_channel>(ex, std::move(channel));
}

cm_channel::cm_channel(const asio::any_io_executor& ex, event_channel_ptr channel)
    : ex_(ex), channel_(std::move(channel)),
      waiter_(ex, channel_->fd, {&cm_channel::on_readable, this}) {}

// The waiter (declared after the channel) releases the fd before the channel
// that owns it is destroyed.
cm_channel::~cm_channel() = default;

cm_id_ptr cm_channel::create_id(cm_event_target* target, rdma_port_space ps, error_code& ec) {
  rdma_cm_id* id = nullptr;
  if (::rdma_create_id(channel_.get(), &id, target, ps) != 0) {
    ec = from_errno();
    return nullptr;
  }
  ec = {};
  return cm_id_ptr(id);
}

void cm_channel::drain() {
  // One event at a time: copy, acknowledge, dispatch. A target may destroy
  // other ids while handling an event; events of destroyed ids that were not
  // yet fetched are discarded by the kernel, so nothing stale is dispatched.
  auto keep_alive = shared_from_this();
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (::rdma_get_cm_event(channel_.get(), &raw) != 0)
      return; // EAGAIN: drained (other errors leave nothing to dispatch either)
    cm_event ev;
    ev.type = raw->event;
    ev.status = raw->status;
    ev.id = raw->id;
    ev.listen_id = raw->listen_id;
    if (raw->id && raw->id->ps == RDMA_PS_TCP) {
      const auto& conn = raw->param.conn;
      ev.initiator_depth = conn.initiator_depth;
      ev.responder_resources = conn.responder_resources;
      ev.set_private_data(conn.private_data, conn.private_data_len);
    }
    if (raw->id && raw->id->ps == RDMA_PS_UDP &&
        (raw->event == RDMA_CM_EVENT_ESTABLISHED || raw->event == RDMA_CM_EVENT_MULTICAST_JOIN)) {
      ev.ud_qp_num = raw->param.ud.qp_num;
      ev.ud_qkey = raw->param.ud.qkey;
      ev.ud_ah_attr = raw->param.ud.ah_attr;
    }
    // For a connect request the new id still carries the listener's context.
    auto* target = static_cast<cm_event_target*>(raw->id ? raw->id->context : nullptr);
    ::rdma_ack_cm_event(raw);
    ASIO_RDMA_TRACE("cm event %s (status %d) id %p -> %s", ::rdma_event_str(ev.type), ev.status,
                    static_cast<void*>(ev.id), target ? "target" : "dropped");
    if (target)
      target->on_cm_event(ev);
  }
}

} // namespace asio_rdma::detail
