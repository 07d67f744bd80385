#include "raw_common.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rdma_bench::raw {

void fail(const std::string& what, int err) {
  if (err == 0)
    err = errno;
  throw std::runtime_error("raw verbs: " + what + ": " + std::strerror(err));
}

rdma_cm_event* expect_event(rdma_event_channel* channel, rdma_cm_event_type expected) {
  rdma_cm_event* event = nullptr;
  // The channel may be non-blocking (the server's): wait for it first.
  pollfd fd{channel->fd, POLLIN, 0};
  while (::rdma_get_cm_event(channel, &event) != 0) {
    if (errno != EAGAIN)
      fail("rdma_get_cm_event");
    if (::poll(&fd, 1, -1) < 0 && errno != EINTR)
      fail("poll");
  }
  if (event->event != expected) {
    std::string got = ::rdma_event_str(event->event);
    int status = event->status;
    ::rdma_ack_cm_event(event);
    throw std::runtime_error("raw verbs: expected " + std::string(::rdma_event_str(expected)) +
                             ", got " + got + " (status " + std::to_string(status) + ")");
  }
  return event;
}

endpoint::~endpoint() {
  if (qp)
    ::rdma_destroy_qp(id);
  if (mr)
    ::ibv_dereg_mr(mr);
  std::free(buffer);
  if (cq) {
    if (unacked_events)
      ::ibv_ack_cq_events(cq, unacked_events);
    ::ibv_destroy_cq(cq);
  }
  if (events)
    ::ibv_destroy_comp_channel(events);
  if (pd)
    ::ibv_dealloc_pd(pd);
}

void endpoint::create(rdma_cm_id* cm_id, const test_parameters& t, std::uint32_t receive_depth,
                      std::size_t size, bool with_events) {
  id = cm_id;
  if (!(pd = ::ibv_alloc_pd(id->verbs)))
    fail("ibv_alloc_pd");
  if (with_events && !(events = ::ibv_create_comp_channel(id->verbs)))
    fail("ibv_create_comp_channel");
  const int cq_size = static_cast<int>(t.depth + receive_depth + 16);
  if (!(cq = ::ibv_create_cq(id->verbs, cq_size, nullptr, events, 0)))
    fail("ibv_create_cq");
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = t.depth;
  attr.cap.max_recv_wr = std::max<std::uint32_t>(receive_depth, 1);
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = t.inline_size;
  if (::rdma_create_qp(id, pd, &attr) != 0)
    fail("rdma_create_qp");
  qp = true;
  inline_limit = std::min(attr.cap.max_inline_data, t.inline_size);
  const std::size_t page = 4096;
  buffer_size = (std::max<std::size_t>(size, 1) + page - 1) / page * page;
  buffer = static_cast<std::byte*>(std::aligned_alloc(page, buffer_size));
  if (!buffer)
    fail("aligned_alloc", ENOMEM);
  std::memset(buffer, 0, buffer_size);
  mr = ::ibv_reg_mr(pd, buffer, buffer_size,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC);
  if (!mr)
    fail("ibv_reg_mr");
  if (events && ::ibv_req_notify_cq(cq, 0) != 0)
    fail("ibv_req_notify_cq");
}

int endpoint::poll(ibv_wc* wc, int n) {
  int got = ::ibv_poll_cq(cq, n, wc);
  if (got != 0 || !events)
    return got;
  // Event mode: sleep on the completion channel, re-arm, then drain.
  ibv_cq* ev_cq = nullptr;
  void* context = nullptr;
  if (::ibv_get_cq_event(events, &ev_cq, &context) != 0)
    fail("ibv_get_cq_event");
  if (++unacked_events == 64) {
    ::ibv_ack_cq_events(cq, unacked_events);
    unacked_events = 0;
  }
  if (::ibv_req_notify_cq(cq, 0) != 0)
    fail("ibv_req_notify_cq");
  return ::ibv_poll_cq(cq, n, wc);
}

void endpoint::check(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS)
    throw std::runtime_error(std::string("raw verbs: work completion failed: ") +
                             ::ibv_wc_status_str(wc.status));
}

void endpoint::post_receives(std::uint32_t first, std::uint32_t count, std::size_t size,
                             std::uint32_t slots) {
  constexpr std::uint32_t chunk = 64;
  ibv_recv_wr wrs[chunk];
  ibv_sge sges[chunk];
  while (count > 0) {
    std::uint32_t n = std::min(count, chunk);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t slot = (first + i) % slots;
      sges[i] = {reinterpret_cast<std::uint64_t>(buffer + slot * size),
                 static_cast<std::uint32_t>(size), mr->lkey};
      wrs[i] = {};
      wrs[i].wr_id = slot;
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (int err = ::ibv_post_recv(id->qp, wrs, &bad))
      fail("ibv_post_recv", err);
    first += n;
    count -= n;
  }
}

buffer_description endpoint::describe() const {
  return {reinterpret_cast<std::uint64_t>(buffer), mr->rkey, buffer_size};
}

} // namespace rdma_bench::raw
