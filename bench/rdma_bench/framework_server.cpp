// The framework server: takes each connection request undecided, reads the
// test parameters from its private data, accepts with matching options and
// serves the test until the client disconnects. Any number of runs, one
// after another or at once.
#include "framework.hpp"

#include "rpc_calls.hpp"
#include "streams.hpp"
#include "wire.hpp"

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <iostream>
#include <memory>
#include <vector>

namespace rdma_bench::framework {

namespace asio = boost::asio;
using asio::awaitable;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

struct session {
  asio_rdma::connection conn;
  test_parameters t;
  asio_rdma::memory_region region;
  asio_rdma::remote_buffer client_region;
  std::vector<std::byte> buffer; // latency tests' requests
  bool stopped = false;
};

/// Bidirectional send: the server's half, until the client disconnects.
awaitable<void> sender(std::shared_ptr<session> s, std::uint32_t slot) {
  auto local = s->region.slice(slot * s->t.size, s->t.size);
  while (!s->stopped) {
    auto [ec, n] =
        co_await async_send_from(s->conn, local, s->t.copied_sends, tuple_awaitable);
    if (ec)
      s->stopped = true;
  }
}

/// Receives until end of stream; answers each message in latency mode. In bandwidth tests
/// the messages are received in place (async_receive_lent) and given back unread, as
/// perftest's server and the raw-verbs mode repost their buffers untouched; in latency
/// tests they are copied (a few bytes), as a service reads a request.
awaitable<void> responder(std::shared_ptr<session> s) {
  const bool answer = s->t.mode == test_mode::latency;
  auto local = s->region.slice(0, s->t.size);
  auto remote = s->client_region.slice(0, s->t.size);
  for (;;) {
    asio_rdma::error_code ec;
    asio_rdma::received_message message;
    if (answer) {
      std::tie(ec, message) =
          co_await s->conn.async_receive_message(asio::buffer(s->buffer), tuple_awaitable);
    } else {
      auto [lent_ec, lent] = co_await s->conn.async_receive_lent(tuple_awaitable);
      ec = lent_ec;
    }
    if (ec) {
      if (ec != asio::error::eof && ec != asio::error::operation_aborted)
        std::cerr << "rdma_bench: session ended: " << ec.message() << std::endl;
      break;
    }
    if (!answer)
      continue;
    // A write's request came with immediate data, or (a device without it: iWARP) as an
    // empty send after the write: answered the same way.
    const bool write_then_send = s->t.op == operation::write && !message.rdma_write;
    const std::array<asio_rdma::batch_entry, 2> write_and_send{
        asio_rdma::batch_entry::write(local, remote),
        asio_rdma::batch_entry::send(s->region.slice(0, 0))};
    if (s->t.post_answers) {
      // --lat-send post: the answer's completion goes to a callback (perftest's way:
      // await the next request only). The session outlives it: the callback holds it.
      auto collect = [s](asio_rdma::error_code ec, std::size_t) {
        if (ec)
          s->stopped = true;
      };
      if (s->t.op == operation::send)
        async_send_from(s->conn, local, s->t.copied_sends, collect);
      else if (write_then_send)
        s->conn.async_batch(write_and_send, collect);
      else
        s->conn.async_write_with_imm(local, remote, 0, collect);
      continue;
    }
    asio_rdma::error_code answer_ec;
    if (s->t.op == operation::send) {
      auto [send_ec, n] =
          co_await async_send_from(s->conn, local, s->t.copied_sends, tuple_awaitable);
      answer_ec = send_ec;
    } else if (write_then_send) {
      auto [batch_ec, n] = co_await s->conn.async_batch(write_and_send, tuple_awaitable);
      answer_ec = batch_ec;
    } else {
      auto [write_ec, n] = co_await s->conn.async_write_with_imm(local, remote, 0, tuple_awaitable);
      answer_ec = write_ec;
    }
    if (answer_ec)
      break;
  }
  s->stopped = true;
}

asio_rdma::connection_options options_for(const test_parameters& t) {
  asio_rdma::connection_options o;
  o.max_message_size = std::max<std::size_t>(t.size, 64);
  o.send_queue_depth = std::max<std::uint32_t>(t.depth, 4);
  // Receives must be posted ahead of a sender that keeps `depth` in flight.
  const bool receives =
      t.op == operation::send || t.op == operation::write_imm || t.mode == test_mode::latency;
  o.receive_queue_depth = receives ? std::max<std::uint32_t>(2 * t.depth, 512) : 16;
  o.max_inline_data = t.inline_size;
  o.timeout = std::chrono::seconds(30);
  o.send_completion = t.acknowledged_sends ? asio_rdma::send_completion::at_acknowledgement
                                           : asio_rdma::send_completion::at_post;
  // One-sided bandwidth (write, read, atomics): nothing completes at this end until the
  // client leaves, so it waits asleep, as the raw-verbs server and perftest's do. Busy
  // polling here took a CPU from the device's kernel work (siw0 in the test VM: 64 KiB
  // writes at about 0.8x of the rate with this end asleep).
  const bool passive = t.mode == test_mode::bandwidth && !receives;
  apply_completion(t, o);
  if (passive)
    o.completion_mode = asio_rdma::completion_mode::event;
  return o;
}

awaitable<void> serve_one(asio_rdma::connection_request request) {
  std::string problem;
  auto t = decode(request.private_data(), problem);
  auto peer = request.remote_endpoint();
  if (!t) {
    std::cerr << "rdma_bench: rejecting " << peer << ": " << problem << std::endl;
    auto reason =
        std::as_bytes(std::span(problem.data(), std::min<std::size_t>(problem.size(), 148)));
    request.reject(reason);
    co_return;
  }
  if (t->op == operation::stream)
    co_return co_await streams::serve(std::move(request), *t);
  if (t->op == operation::rpc)
    co_return co_await rpc_calls::serve(std::move(request), *t);
  auto options = options_for(*t);
  auto conn = co_await request.async_accept(options, asio::use_awaitable);
  auto s = std::make_shared<session>();
  s->conn = std::move(conn);
  s->t = *t;
  const std::size_t slots = t->mode == test_mode::latency ? 1 : t->depth;
  s->region = asio_rdma::memory_region(s->conn, slots * t->size, asio_rdma::access::all);
  s->buffer.resize(options.max_message_size);
  // The client advertises its region first: on iWARP the accepting side must not send
  // before the connecting side's first message (MPA; docs/devices.md).
  auto theirs = co_await s->conn.async_receive_remote_buffer(options.timeout, asio::use_awaitable);
  s->client_region = theirs;
  auto mine = s->region.remote();
  co_await s->conn.async_send_remote_buffer(mine, asio::use_awaitable);
  auto ex = co_await asio::this_coro::executor;
  if (t->bidirectional)
    for (std::uint32_t w = 0; w < t->depth; ++w)
      asio::co_spawn(ex, sender(s, w), asio::detached);
  co_await responder(s);
}

} // namespace

awaitable<void> serve(const settings& s) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::acceptor acceptor(ex, s.host, s.port);
  std::cout << "rdma_bench: listening on " << acceptor.local_endpoint() << std::endl;
  co_await serve(acceptor);
}

awaitable<void> serve(asio_rdma::acceptor& acceptor) {
  auto ex = acceptor.get_executor();
  for (;;) {
    auto [ec, request] = co_await acceptor.async_accept_request(tuple_awaitable);
    if (ec == asio::error::operation_aborted)
      co_return;
    if (ec) {
      std::cerr << "rdma_bench: accept failed: " << ec.message() << std::endl;
      continue;
    }
    asio::co_spawn(ex, serve_one(std::move(request)), [](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "rdma_bench: session failed: " << x.what() << std::endl;
      }
    });
  }
}

} // namespace rdma_bench::framework
