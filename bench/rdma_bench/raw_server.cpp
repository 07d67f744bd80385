// The raw-verbs server: serves one client at a time, forever. Receives are
// kept posted for send and write-with-immediate (reposted in batches); for
// latency it answers each message in kind; for one-sided bandwidth it only
// waits for the disconnect. It busy-polls, or sleeps on its completion
// channel when the client asked for event completions.
#include "asio_floor.hpp"
#include "raw_common.hpp"
#include "raw_verbs.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace rdma_bench::raw {

namespace {

/// The next CM event, or nullptr when none came within `timeout_ms` (-1: wait).
rdma_cm_event* next_event(rdma_event_channel* channel, int timeout_ms) {
  pollfd fd{channel->fd, POLLIN, 0};
  int n = ::poll(&fd, 1, timeout_ms);
  if (n < 0 && errno != EINTR)
    fail("poll");
  if (n <= 0)
    return nullptr;
  rdma_cm_event* event = nullptr;
  if (::rdma_get_cm_event(channel, &event) != 0)
    return errno == EAGAIN ? nullptr : (fail("rdma_get_cm_event"), nullptr);
  return event;
}

/// One connected client.
class session {
public:
  session(rdma_event_channel* channel, rdma_cm_id* id, const test_parameters& t)
      : channel_(channel), t_(t) {
    receives_ = t.op == operation::send || t.op == operation::write_imm
                    ? std::max<std::uint32_t>(2 * t.depth, 512)
                    : 0;
    const std::size_t slots =
        t.mode == test_mode::latency ? 1 : std::max<std::uint32_t>(t.depth, receives_);
    ep_.create(id, t, receives_, slots * t.size, t.event_completion);
    if (receives_)
      ep_.post_receives(0, receives_, t.size, t.mode == test_mode::latency ? 1 : receives_);
  }

  endpoint& resources() { return ep_; }

  /// Serves until the client disconnects.
  void run(const buffer_description& client) {
    if (t_.mode == test_mode::latency &&
        (t_.op == operation::write || t_.op == operation::write_imm))
      return write_ping_pong(client);
    if (t_.mode == test_mode::latency && t_.op == operation::send && t_.asio_floor)
      return awaited_echo(ep_, t_.size, [this] { return wait_disconnect(0); }, channel_->fd);
    if (t_.mode == test_mode::latency && t_.op == operation::send)
      return send_ping_pong();
    if (receives_)
      return drain_receives();
    wait_disconnect(-1);
  }

private:
  /// Checks (without blocking when timeout is 0) whether the client left.
  bool wait_disconnect(int timeout_ms) {
    while (rdma_cm_event* event = next_event(channel_, timeout_ms)) {
      auto type = event->event;
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
        ::rdma_reject(event->id, "busy", 5);
      ::rdma_ack_cm_event(event);
      if (type == RDMA_CM_EVENT_DISCONNECTED)
        return true;
    }
    return false;
  }

  /// Polls completions; false once the client disconnected.
  bool poll(ibv_wc* wc, int n, int& got) {
    got = ::ibv_poll_cq(ep_.cq, n, wc);
    if (got != 0)
      return got > 0 || (fail("ibv_poll_cq", EIO), false);
    if (!ep_.events)
      return (++idle_ & 4095) != 0 || !wait_disconnect(0);
    pollfd fds[2] = {{ep_.events->fd, POLLIN, 0}, {channel_->fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      fail("poll");
    if ((fds[1].revents & POLLIN) && wait_disconnect(0))
      return false;
    if (fds[0].revents & POLLIN) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (::ibv_get_cq_event(ep_.events, &cq, &context) != 0)
        fail("ibv_get_cq_event");
      ::ibv_ack_cq_events(cq, 1);
      if (::ibv_req_notify_cq(ep_.cq, 0) != 0)
        fail("ibv_req_notify_cq");
    }
    got = ::ibv_poll_cq(ep_.cq, n, wc);
    return true;
  }

  void drain_receives() {
    ibv_wc wc[32];
    int n = 0;
    std::uint32_t next = 0, to_post = 0;
    while (poll(wc, 32, n)) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
          return;
        endpoint::check(wc[i]);
        ++to_post;
      }
      if (to_post >= 16 || (n == 0 && to_post)) {
        ep_.post_receives(next, to_post, t_.size, receives_);
        next = (next + to_post) % receives_;
        to_post = 0;
      }
    }
  }

  void send_ping_pong() {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(ep_.buffer), t_.size, ep_.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | (t_.size <= ep_.inline_limit ? IBV_SEND_INLINE : 0);
    ibv_wc wc[4];
    int n = 0;
    while (poll(wc, 4, n)) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
          return;
        endpoint::check(wc[i]);
        if (wc[i].opcode != IBV_WC_RECV)
          continue;
        ep_.post_receives(0, 1, t_.size, 1);
        ibv_send_wr* bad = nullptr;
        if (int err = ::ibv_post_send(ep_.id->qp, &wr, &bad))
          fail("ibv_post_send", err);
      }
    }
  }

  void write_ping_pong(const buffer_description& client) {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(ep_.buffer), t_.size, ep_.mr->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | (t_.size <= ep_.inline_limit ? IBV_SEND_INLINE : 0);
    wr.wr.rdma.remote_addr = client.address + t_.size; // the client's second slot
    wr.wr.rdma.rkey = client.rkey;
    volatile std::byte* flag = ep_.buffer + t_.size - 1;
    std::byte seen{0};
    ibv_wc wc[4];
    for (unsigned spin = 0;; ++spin) {
      if (*flag != seen) {
        seen = *flag;
        // The flag byte travels back unchanged: the client waits for it.
        ibv_send_wr* bad = nullptr;
        if (int err = ::ibv_post_send(ep_.id->qp, &wr, &bad))
          fail("ibv_post_send", err);
      }
      int n = ::ibv_poll_cq(ep_.cq, 4, wc);
      for (int i = 0; i < n; ++i)
        if (wc[i].status != IBV_WC_SUCCESS)
          return;
      if ((spin & 4095) == 0 && wait_disconnect(0))
        return;
    }
  }

  rdma_event_channel* channel_;
  test_parameters t_;
  std::uint32_t receives_ = 0;
  unsigned idle_ = 0;
  endpoint ep_;
};

void serve_request(rdma_event_channel* channel, rdma_cm_event* request) {
  rdma_cm_id* id = request->id;
  std::string problem;
  auto data = static_cast<const std::byte*>(request->param.conn.private_data);
  std::size_t length = data ? request->param.conn.private_data_len : 0;
  auto t = decode(std::span(data, length), problem);
  if (t && length < test_parameters::encoded_size + buffer_description::encoded_size)
    problem = "a raw-verbs client sends its buffer too", t.reset();
  if (!t) {
    std::cerr << "rdma_bench: rejecting a client: " << problem << std::endl;
    ::rdma_reject(id, problem.data(),
                  static_cast<std::uint8_t>(std::min<std::size_t>(problem.size(), 148)));
    ::rdma_ack_cm_event(request);
    ::rdma_destroy_id(id);
    return;
  }
  auto client = decode_buffer(data + test_parameters::encoded_size);
  int initiator = request->param.conn.initiator_depth;
  int responder = request->param.conn.responder_resources;
  ::rdma_ack_cm_event(request);
  try {
    session s(channel, id, *t);
    std::byte reply[buffer_description::encoded_size];
    encode(s.resources().describe(), reply);
    rdma_conn_param param{};
    param.private_data = reply;
    param.private_data_len = sizeof reply;
    param.responder_resources = static_cast<std::uint8_t>(std::min(initiator, 16));
    param.initiator_depth = static_cast<std::uint8_t>(std::min(responder, 16));
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (::rdma_accept(id, &param) != 0)
      fail("rdma_accept");
    ::rdma_ack_cm_event(expect_event(channel, RDMA_CM_EVENT_ESTABLISHED));
    s.run(client);
    ::rdma_disconnect(id);
  } catch (const std::exception& e) {
    std::cerr << "rdma_bench: session failed: " << e.what() << std::endl;
    ::rdma_disconnect(id);
  }
  ::rdma_destroy_id(id);
}

} // namespace

int serve(const settings& s) {
  rdma_event_channel* channel = ::rdma_create_event_channel();
  if (!channel)
    fail("rdma_create_event_channel");
  rdma_cm_id* listener = nullptr;
  if (::rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP) != 0)
    fail("rdma_create_id");
  addrinfo hints{}, *ai = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  auto port = std::to_string(s.port);
  if (int err = ::getaddrinfo(s.host.c_str(), port.c_str(), &hints, &ai))
    throw std::runtime_error("raw verbs: " + s.host + ": " + ::gai_strerror(err));
  int rc = ::rdma_bind_addr(listener, ai->ai_addr);
  ::freeaddrinfo(ai);
  if (rc != 0)
    fail("rdma_bind_addr " + s.host + ":" + port);
  if (::rdma_listen(listener, 8) != 0)
    fail("rdma_listen");
  // Non-blocking: sessions check for the disconnect between polls.
  ::fcntl(channel->fd, F_SETFL, ::fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
  std::cout << "rdma_bench: listening on " << s.host << ":" << s.port << " (raw verbs)"
            << std::endl;
  for (;;) {
    rdma_cm_event* event = next_event(channel, -1);
    if (!event)
      continue;
    if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST)
      serve_request(channel, event);
    else
      ::rdma_ack_cm_event(event);
  }
}

} // namespace rdma_bench::raw
