// The raw-verbs client: perftest's technique. Bandwidth: every slot of the
// window has a prebuilt work request; batches of `signal_every` requests are
// posted with one ibv_post_send and only the last is signalled; completions
// are polled 16 at a time. Latency: one operation at a time; write latency
// polls the last byte of the buffer the peer writes into, as ib_write_lat.
#include "asio_floor.hpp"
#include "measurement.hpp"
#include "raw_common.hpp"
#include "raw_verbs.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

namespace rdma_bench::raw {

namespace {

using clock = measurement::clock;

struct cm_handles {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ~cm_handles() {
    if (id)
      ::rdma_destroy_id(id);
    if (channel)
      ::rdma_destroy_event_channel(channel);
  }
};

ibv_wr_opcode opcode(operation op) {
  switch (op) {
  case operation::send:
    return IBV_WR_SEND;
  case operation::write:
    return IBV_WR_RDMA_WRITE;
  case operation::write_imm:
    return IBV_WR_RDMA_WRITE_WITH_IMM;
  case operation::read:
    return IBV_WR_RDMA_READ;
  case operation::fetch_add:
    return IBV_WR_ATOMIC_FETCH_AND_ADD;
  case operation::compare_swap:
    return IBV_WR_ATOMIC_CMP_AND_SWP;
  case operation::ud_send: // refused by check(): no raw-verbs datagrams
  case operation::stream:  // refused by check(): streams and rpc run on asio_rdma
  case operation::rpc:
    break;
  }
  return IBV_WR_SEND;
}

/// The work request for slot `slot` of the window.
void prepare(ibv_send_wr& wr, ibv_sge& sge, const endpoint& ep, const buffer_description& remote,
             operation op, std::size_t size, std::uint32_t slot) {
  sge = {reinterpret_cast<std::uint64_t>(ep.buffer + slot * size), static_cast<std::uint32_t>(size),
         ep.mr->lkey};
  wr = {};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode(op);
  const bool carries_data =
      op == operation::send || op == operation::write || op == operation::write_imm;
  if (carries_data && size <= ep.inline_limit)
    wr.send_flags |= IBV_SEND_INLINE;
  if (is_atomic(op)) {
    wr.wr.atomic.remote_addr = remote.address + slot * size;
    wr.wr.atomic.rkey = remote.rkey;
    wr.wr.atomic.compare_add = op == operation::fetch_add ? 1 : 0;
    wr.wr.atomic.swap = 0;
  } else {
    wr.wr.rdma.remote_addr = remote.address + slot * size;
    wr.wr.rdma.rkey = remote.rkey;
  }
  if (op == operation::write_imm)
    wr.imm_data = htonl(slot);
}

void post(endpoint& ep, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int err = ::ibv_post_send(ep.id->qp, wr, &bad))
    fail("ibv_post_send", err);
}

result bandwidth(const settings& s, endpoint& ep, const buffer_description& remote,
                 std::size_t size) {
  const std::uint32_t depth = s.depth;
  std::uint32_t signal_every = 1;
  while (signal_every < 16 && depth % (signal_every * 2) == 0)
    signal_every *= 2;
  std::vector<ibv_send_wr> wrs(depth);
  std::vector<ibv_sge> sges(depth);
  for (std::uint32_t i = 0; i < depth; ++i) {
    prepare(wrs[i], sges[i], ep, remote, s.op, size, i);
    if ((i + 1) % signal_every == 0)
      wrs[i].send_flags |= IBV_SEND_SIGNALED;
    else
      wrs[i].next = &wrs[i + 1];
  }
  measurement m(s, size);
  m.begin();
  std::uint64_t posted = 0, completed = 0;
  unsigned idle = 0;
  ibv_wc wc[16];
  for (;;) {
    while (!m.done() && posted - completed < depth) {
      post(ep, &wrs[posted % depth]);
      posted += signal_every;
    }
    if (m.done() && completed == posted)
      break;
    int n = ep.poll(wc, 16);
    if (n < 0)
      fail("ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i)
      endpoint::check(wc[i]);
    if (n > 0) {
      completed += std::uint64_t(n) * signal_every;
      m.completed(std::uint64_t(n) * signal_every, clock::now());
    } else if ((++idle & 255) == 0) {
      m.tick(clock::now());
    }
  }
  return m.take();
}

/// Waits until a completion of each opcode in `wanted` has been seen (others
/// are checked and skipped).
void wait_for(endpoint& ep, std::initializer_list<ibv_wc_opcode> wanted) {
  unsigned missing = static_cast<unsigned>(wanted.size());
  bool seen[2] = {false, false};
  ibv_wc wc[4];
  while (missing > 0) {
    int n = ep.poll(wc, 4);
    if (n < 0)
      fail("ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i) {
      endpoint::check(wc[i]);
      unsigned k = 0;
      for (auto opcode : wanted) {
        if (k < 2 && wc[i].opcode == opcode && !seen[k]) {
          seen[k] = true;
          --missing;
        }
        ++k;
      }
    }
  }
}

result latency(const settings& s, endpoint& ep, const buffer_description& remote,
               std::size_t size) {
  if (s.asio_floor)
    return awaited_latency(s, ep, size);
  ibv_send_wr wr;
  ibv_sge sge;
  prepare(wr, sge, ep, remote, s.op, size, 0);
  wr.send_flags |= IBV_SEND_SIGNALED;
  const bool memory_ping_pong = s.op == operation::write || s.op == operation::write_imm;
  if (memory_ping_pong)
    wr.opcode = IBV_WR_RDMA_WRITE; // ib_write_lat's technique: poll the last byte
  // Write latency: the first slot is the source, the peer writes into the second.
  volatile std::byte* flag = ep.buffer + 2 * size - 1;
  measurement m(s, size);
  m.begin();
  std::uint8_t seq = 0;
  while (!m.done()) {
    seq = static_cast<std::uint8_t>(seq % 255 + 1);
    auto start = clock::now();
    if (memory_ping_pong) {
      ep.buffer[size - 1] = std::byte{seq};
      post(ep, &wr);
      while (*flag != std::byte{seq}) {
      }
      wait_for(ep, {IBV_WC_RDMA_WRITE});
    } else if (s.op == operation::send) {
      post(ep, &wr);
      wait_for(ep, {IBV_WC_SEND, IBV_WC_RECV});
      ep.post_receives(0, 1, size, 1);
    } else {
      post(ep, &wr);
      ibv_wc wc;
      int n = 0;
      while ((n = ep.poll(&wc, 1)) == 0) {
      }
      if (n < 0)
        fail("ibv_poll_cq", EIO);
      endpoint::check(wc);
    }
    auto now = clock::now();
    double us = std::chrono::duration<double, std::micro>(now - start).count();
    m.sample(s.op == operation::send || memory_ping_pong ? us / 2 : us);
    m.completed(1, now);
  }
  return m.take();
}

/// What the device lacks is refused before anything is posted, as the framework refuses
/// it (errc::operation_not_supported), not left to ibv_post_send's EINVAL.
void refuse_what_the_device_lacks(operation op, ibv_context* context) {
  const std::string name = ::ibv_get_device_name(context->device);
  if (op == operation::write_imm && context->device->transport_type == IBV_TRANSPORT_IWARP)
    throw std::runtime_error("raw verbs: " + name +
                             " is an iWARP device: iWARP has no write with immediate data");
  if (is_atomic(op)) {
    ibv_device_attr attr{};
    if (int err = ::ibv_query_device(context, &attr))
      fail("ibv_query_device", err);
    if (attr.atomic_cap == IBV_ATOMIC_NONE)
      throw std::runtime_error("raw verbs: " + name + " has no atomic operations");
  }
}

result run_size(const settings& s, std::size_t size, std::string& device) {
  auto t = parameters_for(s, size);
  cm_handles cm;
  if (!(cm.channel = ::rdma_create_event_channel()))
    fail("rdma_create_event_channel");
  if (::rdma_create_id(cm.channel, &cm.id, nullptr, RDMA_PS_TCP) != 0)
    fail("rdma_create_id");
  addrinfo hints{}, *ai = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto port = std::to_string(s.port);
  if (int err = ::getaddrinfo(s.host.c_str(), port.c_str(), &hints, &ai))
    throw std::runtime_error("raw verbs: " + s.host + ": " + ::gai_strerror(err));
  int rc = ::rdma_resolve_addr(cm.id, nullptr, ai->ai_addr, 5000);
  ::freeaddrinfo(ai);
  if (rc != 0)
    fail("rdma_resolve_addr");
  ::rdma_ack_cm_event(expect_event(cm.channel, RDMA_CM_EVENT_ADDR_RESOLVED));
  if (::rdma_resolve_route(cm.id, 5000) != 0)
    fail("rdma_resolve_route");
  ::rdma_ack_cm_event(expect_event(cm.channel, RDMA_CM_EVENT_ROUTE_RESOLVED));
  refuse_what_the_device_lacks(s.op, cm.id->verbs);

  endpoint ep;
  const bool latency_mode = s.mode == test_mode::latency;
  const std::uint32_t receives = latency_mode && s.op == operation::send ? 16 : 0;
  const std::size_t slots = latency_mode ? 2 : s.depth;
  ep.create(cm.id, t, receives, slots * size, s.completion == completion_mode::event);
  if (receives)
    ep.post_receives(0, receives, size, 1);

  std::byte data[test_parameters::encoded_size + buffer_description::encoded_size];
  auto encoded = encode(t);
  std::memcpy(data, encoded.data(), encoded.size());
  encode(ep.describe(), data + encoded.size());
  rdma_conn_param param{};
  param.private_data = data;
  param.private_data_len = sizeof data;
  param.responder_resources = 16;
  param.initiator_depth = 16;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (::rdma_connect(cm.id, &param) != 0)
    fail("rdma_connect");
  rdma_cm_event* event = expect_event(cm.channel, RDMA_CM_EVENT_ESTABLISHED);
  if (event->param.conn.private_data_len < buffer_description::encoded_size) {
    ::rdma_ack_cm_event(event);
    throw std::runtime_error("raw verbs: the server sent no buffer description");
  }
  auto remote = decode_buffer(static_cast<const std::byte*>(event->param.conn.private_data));
  ::rdma_ack_cm_event(event);
  device = ::ibv_get_device_name(cm.id->verbs->device);

  result r = latency_mode ? latency(s, ep, remote, size) : bandwidth(s, ep, remote, size);
  ::rdma_disconnect(cm.id);
  ::rdma_ack_cm_event(expect_event(cm.channel, RDMA_CM_EVENT_DISCONNECTED));
  return r;
}

} // namespace

int run_client(const settings& s) {
  std::vector<result> results;
  std::string device;
  for (auto size : s.sizes) {
    results.push_back(run_size(s, size, device));
    if (results.size() == 1)
      print_header(s, device);
    print_row(s, results.back());
  }
  if (!s.json_path.empty())
    write_json(s.json_path, s, device, results);
  return 0;
}

} // namespace rdma_bench::raw
