// The framework client: `depth` worker coroutines per connection (or
// --coroutines), each with one operation in flight, on memory registered once
// per size; the latency test is one ping-pong coroutine.
#include "framework.hpp"

#include "measurement.hpp"
#include "results.hpp"
#include "sweep.hpp"
#include "wire.hpp"

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <infiniband/verbs.h>

#include <array>
#include <iostream>
#include <memory>
#include <vector>

namespace rdma_bench::framework {

namespace asio = boost::asio;
using asio::awaitable;
using clock = measurement::clock;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

/// One connection of a test and the memory both peers use.
struct peer {
  asio_rdma::connection conn;
  asio_rdma::memory_region region; // depth slots of the message size
  asio_rdma::remote_buffer remote; // the server's region
  std::vector<std::byte> receive_buffer;
};

struct run {
  const settings& s;
  std::size_t size;
  measurement m;
  asio::steady_timer wake; // the controller's timer; cancelled when all is done
  unsigned live_workers = 0;
  asio_rdma::error_code failure;
  unsigned posted_requests = 0; // --lat-send post: requests whose completion is still due

  void fail(asio_rdma::error_code ec) {
    if (!failure && !m.done())
      failure = ec;
    m.abort(clock::now());
  }
};

/// One operation of the bandwidth test on slot `slot` of `p`.
awaitable<asio_rdma::error_code> issue(peer& p, operation op, std::size_t size,
                                       std::uint32_t slot, bool copied_sends) {
  auto local = p.region.slice(slot * size, size);
  auto remote = p.remote.slice(slot * size, size);
  switch (op) {
  case operation::send: {
    auto [ec, n] = co_await async_send_from(p.conn, local, copied_sends, tuple_awaitable);
    co_return ec;
  }
  case operation::write: {
    auto [ec, n] = co_await p.conn.async_write(local, remote, tuple_awaitable);
    co_return ec;
  }
  case operation::write_imm: {
    auto [ec, n] = co_await p.conn.async_write_with_imm(local, remote, slot, tuple_awaitable);
    co_return ec;
  }
  case operation::read: {
    auto [ec, n] = co_await p.conn.async_read(local, remote, tuple_awaitable);
    co_return ec;
  }
  case operation::fetch_add: {
    auto [ec, old] = co_await p.conn.async_fetch_add(remote, 1, tuple_awaitable);
    co_return ec;
  }
  case operation::compare_swap: {
    auto [ec, old] = co_await p.conn.async_compare_swap(remote, 0, 0, tuple_awaitable);
    co_return ec;
  }
  case operation::ud_send: // datagrams.cpp
  case operation::stream:  // streams.cpp
  case operation::rpc:     // rpc_calls.cpp
    break;
  }
  co_return asio_rdma::error_code(asio::error::operation_not_supported);
}

awaitable<void> bandwidth_worker(run& r, peer& p, std::uint32_t slot) {
  while (!r.m.done()) {
    auto ec = co_await issue(p, r.s.op, r.size, slot, r.s.copied_sends);
    if (ec) {
      r.fail(ec);
      break;
    }
    r.m.completed(1, clock::now());
  }
  if (--r.live_workers == 0)
    r.wake.cancel();
}

/// Bandwidth with async_batch: `entries` (this worker's slots) go as one operation, again
/// and again.
awaitable<void> batch_worker(run& r, peer& p, std::vector<asio_rdma::batch_entry> entries) {
  while (!r.m.done()) {
    auto [ec, n] = co_await p.conn.async_batch(entries, tuple_awaitable);
    if (ec) {
      r.fail(ec);
      break;
    }
    r.m.completed(entries.size(), clock::now());
  }
  if (--r.live_workers == 0)
    r.wake.cancel();
}

/// The requests of batch worker `w`: slots [w * batch, (w + 1) * batch) of `p`.
std::vector<asio_rdma::batch_entry> batch_of(const peer& p, operation op, std::size_t size,
                                             std::uint32_t w, std::uint32_t batch) {
  std::vector<asio_rdma::batch_entry> entries;
  for (std::uint32_t i = w * batch; i < (w + 1) * batch; ++i) {
    auto local = p.region.slice(i * size, size);
    auto remote = p.remote.slice(i * size, size);
    switch (op) {
    case operation::send:
      entries.push_back(asio_rdma::batch_entry::send(local));
      break;
    case operation::write:
      entries.push_back(asio_rdma::batch_entry::write(local, remote));
      break;
    case operation::write_imm:
      entries.push_back(asio_rdma::batch_entry::write_with_imm(local, remote, i));
      break;
    default: // check() allows nothing else
      entries.push_back(asio_rdma::batch_entry::read(local, remote));
      break;
    }
  }
  return entries;
}

/// Bidirectional send: counts what the server sends back.
awaitable<void> receive_counter(run& r, peer& p) {
  while (!r.m.done()) {
    auto [ec, n] = co_await p.conn.async_receive(asio::buffer(p.receive_buffer), tuple_awaitable);
    if (ec) {
      r.fail(ec);
      break;
    }
    r.m.completed(1, clock::now());
  }
  if (--r.live_workers == 0)
    r.wake.cancel();
}

std::string device_name(const asio_rdma::connection& c) {
  auto* qp = c.native_queue_pair();
  return qp ? ::ibv_get_device_name(qp->context->device) : "?";
}

/// Whether the device of `c` has write with immediate data (iWARP has not).
bool has_immediate_data(const asio_rdma::connection& c) {
  return asio_rdma::query_device(device_name(c)).immediate_data;
}

/// Ping-pong. send, write and write_imm: one-way latency (half the round trip, the
/// peer answers in kind); read and atomics: the operation's round trip.
awaitable<void> latency_worker(run& r, peer& p) {
  auto local = p.region.slice(0, r.size);
  auto remote = p.remote.slice(0, r.size);
  const bool ping_pong =
      r.s.op == operation::send || r.s.op == operation::write_imm || r.s.op == operation::write;
  // A plain write cannot wake the peer's event loop: write latency tells the peer with
  // the write's immediate data, or where the device has none (iWARP) with an empty send
  // in the same batch (RC delivers it after the written bytes). The server answers as
  // it was asked. write_imm itself is refused there, clearly.
  const bool write_then_send = r.s.op == operation::write && !has_immediate_data(p.conn);
  const std::array<asio_rdma::batch_entry, 2> write_and_send{
      asio_rdma::batch_entry::write(local, remote),
      asio_rdma::batch_entry::send(p.region.slice(0, 0))};
  // --lat-send post: the request's completion goes to this callback, not awaited.
  auto collect = [&r, &p](asio_rdma::error_code ec, std::size_t) {
    --r.posted_requests;
    if (ec) {
      r.fail(ec);
      p.conn.close(); // no reply will come (a refused request): end the wait for it
    }
  };
  while (!r.m.done()) {
    auto start = clock::now();
    asio_rdma::error_code ec;
    if (r.s.lat_post_send) {
      ++r.posted_requests;
      if (r.s.op == operation::send)
        async_send_from(p.conn, local, r.s.copied_sends, collect);
      else if (write_then_send)
        p.conn.async_batch(write_and_send, collect);
      else
        p.conn.async_write_with_imm(local, remote, 0, collect);
    } else if (r.s.op == operation::send) {
      auto [send_ec, n] =
          co_await async_send_from(p.conn, local, r.s.copied_sends, tuple_awaitable);
      ec = send_ec;
    } else if (write_then_send) {
      auto [write_ec, n] = co_await p.conn.async_batch(write_and_send, tuple_awaitable);
      ec = write_ec;
    } else if (r.s.op == operation::write || r.s.op == operation::write_imm) {
      auto [write_ec, n] = co_await p.conn.async_write_with_imm(local, remote, 0, tuple_awaitable);
      ec = write_ec;
    } else {
      ec = co_await issue(p, r.s.op, r.size, 0, false);
    }
    if (!ec && ping_pong) {
      auto [receive_ec, message] =
          co_await p.conn.async_receive_message(asio::buffer(p.receive_buffer), tuple_awaitable);
      ec = receive_ec;
    }
    if (ec) {
      r.fail(ec);
      break;
    }
    auto now = clock::now();
    double us = std::chrono::duration<double, std::micro>(now - start).count();
    r.m.sample(ping_pong ? us / 2 : us);
    r.m.completed(1, now);
  }
  // The callbacks use `r`: wait for the last requests' completions (the replies came,
  // so they are due at once).
  asio::steady_timer due(co_await asio::this_coro::executor);
  for (int i = 0; r.posted_requests > 0 && i < 10000; ++i) {
    due.expires_after(std::chrono::milliseconds(1));
    co_await due.async_wait(tuple_awaitable);
  }
  if (--r.live_workers == 0)
    r.wake.cancel();
}

asio_rdma::connection_options options_for(const settings& s, std::size_t size) {
  asio_rdma::connection_options o;
  o.max_message_size = std::max<std::size_t>(size, 64);
  o.send_queue_depth = std::max<std::uint32_t>(s.depth, 4);
  o.receive_queue_depth =
      s.bidirectional || s.mode == test_mode::latency ? std::max(s.depth, 16u) : 16;
  o.max_inline_data = s.inline_size;
  o.siw_zero_copy = s.siw_zero_copy;
  o.send_completion = s.acknowledged_sends ? asio_rdma::send_completion::at_acknowledgement
                                           : asio_rdma::send_completion::at_post;
  o.timeout = s.connect_timeout;
  o.keepalive_interval = s.keepalive_interval;
  const test_parameters t = parameters_for(s, size);
  apply_completion(t, o); // as the server will
  auto encoded = encode(t);
  o.private_data.assign(encoded.begin(), encoded.end());
  return o;
}

/// Connects, exchanges the regions, runs one size, disconnects.
awaitable<result> run_size(const settings& s, std::size_t size, std::string& device) {
  auto ex = co_await asio::this_coro::executor;
  auto options = options_for(s, size);
  if (s.shared_queues) {
    // One CQ (and one fd wait) for every connection of this run.
    asio_rdma::shared_queue_options q;
    q.receive_queue_depth =
        std::min<std::uint32_t>(65536, s.connections * options.receive_queue_depth);
    q.max_message_size = options.max_message_size;
    q.completion_queue_size = s.connections * options.send_queue_depth + q.receive_queue_depth;
    q.completion_mode = options.completion_mode;
    options.shared_queues = asio_rdma::shared_queues(ex, q);
  }
  std::vector<std::unique_ptr<peer>> peers;
  for (std::uint32_t c = 0; c < s.connections; ++c) {
    auto conn = co_await asio_rdma::async_connect(ex, s.host, s.port, options, asio::use_awaitable);
    auto p = std::make_unique<peer>();
    p->conn = std::move(conn);
    const std::size_t slots = s.mode == test_mode::latency ? 1 : s.depth;
    p->region = asio_rdma::memory_region(p->conn, slots * size, asio_rdma::access::all);
    p->receive_buffer.resize(options.max_message_size);
    // The client advertises its region first, then the server its own (on iWARP the
    // accepting side must not send first).
    auto mine = p->region.remote();
    co_await p->conn.async_send_remote_buffer(mine, asio::use_awaitable);
    auto remote =
        co_await p->conn.async_receive_remote_buffer(options.timeout, asio::use_awaitable);
    p->remote = remote;
    peers.push_back(std::move(p));
  }
  device = device_name(peers.front()->conn);

  run r{s, size, measurement(s, size), asio::steady_timer(ex), 0, {}};
  const std::uint32_t workers = s.coroutines ? s.coroutines : s.depth;
  auto report = [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  };
  r.m.begin();
  for (auto& p : peers) {
    if (s.mode == test_mode::latency) {
      ++r.live_workers;
      asio::co_spawn(ex, latency_worker(r, *p), report);
      continue;
    }
    if (s.batch > 1) {
      for (std::uint32_t w = 0; w < std::max(1u, s.depth / s.batch); ++w) {
        ++r.live_workers;
        asio::co_spawn(ex, batch_worker(r, *p, batch_of(*p, s.op, size, w, s.batch)), report);
      }
      continue;
    }
    for (std::uint32_t w = 0; w < workers; ++w) {
      ++r.live_workers;
      asio::co_spawn(ex, bandwidth_worker(r, *p, w % s.depth), report);
    }
    if (s.bidirectional) {
      ++r.live_workers;
      asio::co_spawn(ex, receive_counter(r, *p), report);
    }
  }
  // The clock is read on completions; this timer also ends a run in which
  // nothing completes any more.
  while (r.live_workers > 0) {
    r.wake.expires_after(std::chrono::milliseconds(100));
    co_await r.wake.async_wait(tuple_awaitable);
    r.m.tick(clock::now());
  }
  if (s.statistics)
    for (auto& p : peers) {
      const auto st = p->conn.statistics();
      std::cerr << "# statistics: posts " << st.posts << ", work requests " << st.work_requests
                << ", signalled " << st.signaled << ", inline " << st.inline_sends << '\n';
    }
  // A failed connection is closed by its destructor: a disconnect would wait
  // for a peer that may be gone.
  if (!r.failure)
    for (auto& p : peers)
      co_await p->conn.async_disconnect(tuple_awaitable);
  if (r.failure)
    throw boost::system::system_error(r.failure, std::string(name(s.op))); // main() adds "rdma_bench: "
  co_return r.m.take();
}

} // namespace

awaitable<result> measure(const settings& s, std::size_t size, std::string& device) {
  co_return co_await run_size(s, size, device);
}

awaitable<int> run_client(const settings& s) {
  return run_sweep(s, run_size);
}

} // namespace rdma_bench::framework
