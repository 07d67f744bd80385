// rdma_bench --op ud_send: the datagram server and client (see datagrams.hpp),
// written on asio_rdma's public datagram_socket API only.
#include "datagrams.hpp"

#include "measurement.hpp"
#include "results.hpp"
#include "sweep.hpp"
#include "wire.hpp"

#include <asio_rdma/datagram_socket.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <infiniband/verbs.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rdma_bench::datagrams {

namespace asio = boost::asio;
using asio::awaitable;
using clock = measurement::clock;

std::array<std::byte, control::encoded_size> encode(const control& c) {
  std::array<std::byte, control::encoded_size> out{};
  out[0] = std::byte{'R'};
  out[1] = std::byte{'B'};
  out[2] = std::byte{'U'};
  out[3] = std::byte{'D'};
  out[4] = std::byte{1};
  out[5] = static_cast<std::byte>(c.type);
  out[6] = static_cast<std::byte>(c.mode);
  out[7] = static_cast<std::byte>(c.completion);
  wire::put(&out[8], c.size, 4);
  wire::put(&out[16], c.value, 8);
  return out;
}

std::optional<control> decode(std::span<const std::byte> in) {
  if (in.size() != control::encoded_size || in[0] != std::byte{'R'} || in[1] != std::byte{'B'} ||
      in[2] != std::byte{'U'} || in[3] != std::byte{'D'} || in[4] != std::byte{1})
    return std::nullopt;
  const auto type = wire::get(&in[5], 1), mode = wire::get(&in[6], 1),
             completion = wire::get(&in[7], 1);
  if (type < 1 || type > 4 || mode < 1 || mode > 2 || completion > 2)
    return std::nullopt;
  control c;
  c.type = static_cast<control::kind>(type);
  c.mode = static_cast<test_mode>(mode);
  c.completion = static_cast<completion_mode>(completion);
  c.size = static_cast<std::uint32_t>(wire::get(&in[8], 4));
  c.value = wire::get(&in[16], 8);
  return c;
}

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
// A test socket nobody has used for this long is closed (a client that died).
constexpr auto idle_limit = std::chrono::seconds(10);
// A control request, or a latency ping, unanswered for this long is sent again.
constexpr auto resend_after = std::chrono::milliseconds(500);
constexpr int control_attempts = 10;

asio_rdma::completion_mode library_mode(completion_mode m) {
  switch (m) {
  case completion_mode::busy:
    return asio_rdma::completion_mode::busy_poll;
  case completion_mode::adaptive:
    return asio_rdma::completion_mode::adaptive;
  case completion_mode::event:
    break;
  }
  return asio_rdma::completion_mode::event;
}

std::string device_of(const asio_rdma::datagram_socket& sock) {
  auto* qp = sock.native_queue_pair();
  return qp ? ::ibv_get_device_name(qp->context->device) : "?";
}

// ---------------------------------------------------------------- server

struct test_socket {
  test_socket(asio_rdma::datagram_socket s) : sock(std::move(s)) {}
  asio_rdma::datagram_socket sock;
  clock::time_point last_used = clock::now();
};

/// Closes the test socket once idle (which ends serve_test's receive).
awaitable<void> idle_watch(std::shared_ptr<test_socket> t) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (t->sock.is_open()) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(tuple_awaitable);
    if (clock::now() - t->last_used > idle_limit)
      t->sock.close();
  }
}

/// One client's test: counts datagrams (bandwidth) or echoes them
/// (latency); answers stop with the count.
awaitable<void> serve_test(std::shared_ptr<test_socket> t, test_mode mode) {
  std::vector<std::byte> buffer(t->sock.max_message_size());
  std::uint64_t received = 0;
  for (;;) {
    auto [ec, n, sender] =
        co_await t->sock.async_receive_from(asio::buffer(buffer), tuple_awaitable);
    if (ec)
      break; // closed when idle
    t->last_used = clock::now();
    if (auto c = decode(std::span(buffer.data(), n))) {
      if (c->type != control::kind::stop)
        continue;
      control reply;
      reply.type = control::kind::stopped;
      reply.mode = mode;
      reply.value = received;
      auto bytes = encode(reply);
      co_await t->sock.async_send_to(asio::buffer(bytes), sender, tuple_awaitable);
      continue;
    }
    ++received;
    if (mode == test_mode::latency)
      co_await t->sock.async_send_to(asio::buffer(buffer.data(), n), sender, tuple_awaitable);
  }
}

// ---------------------------------------------------------------- client

/// Sends `request` to `peer` until a control datagram of kind `expected`
/// comes back (other datagrams, e.g. late echoes, are skipped).
awaitable<control> exchange(asio_rdma::datagram_socket& sock,
                            const asio_rdma::datagram_endpoint& peer, const control& request,
                            control::kind expected) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<std::byte> buffer(sock.max_message_size());
  const auto bytes = encode(request);
  for (int attempt = 0; attempt < control_attempts; ++attempt) {
    auto [send_ec, sent] = co_await sock.async_send_to(asio::buffer(bytes), peer, tuple_awaitable);
    if (send_ec)
      throw boost::system::system_error(send_ec, "ud_send control");
    asio::cancellation_signal cancel;
    asio::steady_timer timer(ex, resend_after);
    timer.async_wait([&cancel](asio_rdma::error_code ec) {
      if (!ec)
        cancel.emit(asio::cancellation_type::terminal);
    });
    for (;;) {
      auto [ec, n, sender] = co_await sock.async_receive_from(
          asio::buffer(buffer), asio::bind_cancellation_slot(cancel.slot(), tuple_awaitable));
      if (ec == asio::error::operation_aborted)
        break; // no answer in time: ask again
      if (ec)
        throw boost::system::system_error(ec, "ud_send control");
      if (auto c = decode(std::span(buffer.data(), n)); c && c->type == expected) {
        timer.cancel();
        co_return *c;
      }
    }
  }
  throw std::runtime_error("ud_send: no answer from the datagram server at " +
                           peer.address.to_string() +
                           " (is 'rdma_bench server --bind ADDR' "
                           "running there? datagrams may also have been lost)");
}

struct client_run {
  client_run(const settings& s, std::size_t size, asio_rdma::datagram_socket& sock,
             asio_rdma::datagram_endpoint peer, const asio::any_io_executor& ex)
      : s(s), size(size), sock(sock), peer(std::move(peer)), m(s, size), wake(ex) {}

  const settings& s;
  std::size_t size;
  asio_rdma::datagram_socket& sock;
  asio_rdma::datagram_endpoint peer;
  measurement m;
  asio::steady_timer wake;
  unsigned live_workers = 0;
  asio_rdma::error_code failure;
  std::uint64_t sent = 0;
  std::uint64_t lost_pings = 0;
  // Latency: when the ping in flight left, and the signal that gives up on it.
  clock::time_point ping_sent{};
  bool ping_in_flight = false;
  asio::cancellation_signal give_up;

  void fail(asio_rdma::error_code ec) {
    if (!failure && !m.done())
      failure = ec;
    m.abort(clock::now());
  }
  void worker_done() {
    if (--live_workers == 0)
      wake.cancel();
  }
};

awaitable<void> bandwidth_worker(client_run& r, std::span<const std::byte> payload) {
  while (!r.m.done()) {
    auto [ec, n] = co_await r.sock.async_send_to(asio::buffer(payload.data(), payload.size()),
                                                 r.peer, tuple_awaitable);
    if (ec) {
      r.fail(ec);
      break;
    }
    ++r.sent;
    r.m.completed(1, clock::now());
  }
  r.worker_done();
}

/// Ping-pong: one-way latency is half the round trip, as perftest reports.
awaitable<void> latency_worker(client_run& r, std::span<const std::byte> payload) {
  std::vector<std::byte> in(r.sock.max_message_size());
  while (!r.m.done()) {
    auto start = clock::now();
    r.ping_sent = start;
    auto [send_ec, n] = co_await r.sock.async_send_to(asio::buffer(payload.data(), payload.size()),
                                                      r.peer, tuple_awaitable);
    if (send_ec) {
      r.fail(send_ec);
      break;
    }
    ++r.sent;
    r.ping_in_flight = true;
    auto [ec, got, sender] = co_await r.sock.async_receive_from(
        asio::buffer(in), asio::bind_cancellation_slot(r.give_up.slot(), tuple_awaitable));
    r.ping_in_flight = false;
    if (ec == asio::error::operation_aborted && !r.m.done()) {
      ++r.lost_pings; // the ping or its echo was dropped: send another
      continue;
    }
    if (ec) {
      r.fail(ec);
      break;
    }
    auto now = clock::now();
    r.m.sample(std::chrono::duration<double, std::micro>(now - start).count() / 2);
    r.m.completed(1, now);
  }
  r.worker_done();
}

/// The address of this machine's interface towards `host` (the route's
/// source, as the kernel picks it; no packet is sent).
std::string local_address_towards(const asio::any_io_executor& ex, const std::string& host,
                                  std::uint16_t port) {
  asio_rdma::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec)
    throw std::runtime_error("ud_send needs a numeric server address, not '" + host + "'");
  asio::ip::udp::socket probe(ex);
  probe.connect(asio::ip::udp::endpoint(address, port), ec);
  if (ec)
    throw boost::system::system_error(ec, "no route to " + host);
  return probe.local_endpoint().address().to_string();
}

awaitable<result> run_size(const settings& s, std::size_t size, std::string& device) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::datagram_options options;
  options.send_depth = std::max<std::uint32_t>(s.depth, 4);
  options.receive_depth = 256;
  options.completion_mode = library_mode(s.completion);
  asio_rdma::datagram_socket sock(ex, local_address_towards(ex, s.host, s.port), 0, options);
  device = device_of(sock);
  if (size > sock.max_message_size())
    throw std::runtime_error("ud_send: --size " + std::to_string(size) +
                             " is larger than a datagram may be here: at most " +
                             std::to_string(sock.max_message_size()) +
                             " bytes (the path MTU: the active MTU of " + device + "'s port)");

  auto listener = co_await sock.async_resolve(s.host, s.port, asio::use_awaitable);
  control start;
  start.type = control::kind::start;
  start.mode = s.mode;
  start.completion = s.completion;
  start.size = static_cast<std::uint32_t>(size);
  auto started = co_await exchange(sock, listener, start, control::kind::started);
  if (started.value == 0 || started.value > 65535)
    throw std::runtime_error("ud_send: the server named no test port");
  auto peer = co_await sock.async_resolve(s.host, static_cast<std::uint16_t>(started.value),
                                          asio::use_awaitable);

  std::vector<std::byte> payload(size); // zero-filled: never a control datagram
  client_run r(s, size, sock, peer, ex);
  auto report = [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  };
  r.m.begin();
  if (s.mode == test_mode::latency) {
    ++r.live_workers;
    asio::co_spawn(ex, latency_worker(r, payload), report);
  } else {
    for (std::uint32_t w = 0; w < s.depth; ++w) {
      ++r.live_workers;
      asio::co_spawn(ex, bandwidth_worker(r, payload), report);
    }
  }
  // Ends a run in which nothing completes any more, and gives up on lost pings.
  while (r.live_workers > 0) {
    r.wake.expires_after(std::chrono::milliseconds(100));
    co_await r.wake.async_wait(tuple_awaitable);
    auto now = clock::now();
    r.m.tick(now);
    if (r.ping_in_flight && (now - r.ping_sent > resend_after || r.m.done()))
      r.give_up.emit(asio::cancellation_type::terminal);
  }
  if (r.failure)
    throw boost::system::system_error(r.failure, "ud_send");

  control stop;
  stop.type = control::kind::stop;
  stop.mode = s.mode;
  auto stopped = co_await exchange(sock, peer, stop, control::kind::stopped);
  auto out = r.m.take();
  out.datagrams_sent = r.sent;
  out.datagrams_delivered = stopped.value;
  if (!s.quiet) {
    std::fprintf(stderr,
                 "rdma_bench: ud_send %zu bytes: %llu datagrams sent, %llu arrived (%.2f %% "
                 "lost)%s\n",
                 size, (unsigned long long)r.sent, (unsigned long long)stopped.value,
                 r.sent ? 100.0 * double(r.sent - std::min(r.sent, stopped.value)) / r.sent : 0.0,
                 r.lost_pings ? (", " + std::to_string(r.lost_pings) + " pings sent again").c_str()
                              : "");
  }
  co_return out;
}

} // namespace

awaitable<void> serve(const settings& s) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::datagram_socket listener(ex, s.host, s.port);
  std::vector<std::byte> buffer(listener.max_message_size());
  std::cout << "rdma_bench: datagrams (ud_send) on " << s.host << " port " << listener.local_port()
            << ", at most " << listener.max_message_size() << " bytes" << std::endl;
  for (;;) {
    auto [ec, n, sender] =
        co_await listener.async_receive_from(asio::buffer(buffer), tuple_awaitable);
    if (ec)
      throw boost::system::system_error(ec, "datagram server");
    auto c = decode(std::span(buffer.data(), n));
    if (!c || c->type != control::kind::start)
      continue; // not a request: datagram semantics, nothing to answer
    asio_rdma::datagram_options options;
    // Bandwidth: deep enough that a burst of the client's depth finds buffers.
    options.receive_depth = c->mode == test_mode::bandwidth ? 4096 : 256;
    options.completion_mode = library_mode(c->completion);
    asio_rdma::error_code open_ec;
    asio_rdma::datagram_socket sock(ex, s.host, 0, options, open_ec);
    if (open_ec) {
      std::cerr << "rdma_bench: datagram test socket: " << open_ec.message() << std::endl;
      continue;
    }
    auto test = std::make_shared<test_socket>(std::move(sock));
    control reply;
    reply.type = control::kind::started;
    reply.mode = c->mode;
    reply.value = test->sock.local_port();
    asio::co_spawn(ex, serve_test(test, c->mode), asio::detached);
    asio::co_spawn(ex, idle_watch(test), asio::detached);
    auto bytes = encode(reply);
    co_await listener.async_send_to(asio::buffer(bytes), sender, tuple_awaitable);
  }
}

awaitable<int> run_client(const settings& s) {
  return run_sweep(s, run_size);
}

} // namespace rdma_bench::datagrams
