// When a copied send completes (connection_options::send_completion), on a real device:
// when posted (the default), without waiting for the peer, with a later failure still
// reaching the operations that follow and a close that still delivers what completed;
// or when acknowledged, the send itself reporting its error.
#define BOOST_TEST_MODULE integration_send_completion
#include "rdma_test.hpp"

#include <boost/asio/as_tuple.hpp>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::make_pair;
using ar::test::run;
using ar::test::sleep_for;
using asio::awaitable;
using asio::use_awaitable;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

/// iWARP completes sends on acknowledgement whatever the option says (connection_options.hpp).
bool sends_complete_at_post_here() {
  return ar::test::device_under_test().transport != "iWARP";
}

ar::connection_options completing(ar::send_completion when) {
  ar::connection_options o;
  o.send_completion = when;
  return o;
}

/// A receiver with two receive buffers that takes no message yet: a third message finds
/// none (RNR on InfiniBand and RoCE; on iWARP the library's credits hold it back).
ar::connection_options two_buffers() {
  ar::connection_options o;
  o.receive_queue_depth = 2;
  return o;
}

/// Sends `count` awaited messages (message i starts with byte i); returns how long each
/// send took to complete.
awaitable<std::vector<double>> send_numbered(ar::connection& c, int count) {
  std::vector<double> took;
  std::vector<std::byte> msg(100);
  for (int i = 0; i < count; ++i) {
    msg[0] = static_cast<std::byte>(i);
    const auto start = clock_type::now();
    auto n = co_await c.async_send(asio::buffer(msg), use_awaitable);
    BOOST_TEST(n == msg.size());
    took.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
  }
  co_return took;
}

/// Receives `count` messages; checks that they are message 0, 1, ... in order.
awaitable<void> receive_numbered(ar::connection& c, int count) {
  std::vector<std::byte> buf(c.options().max_message_size);
  for (int i = 0; i < count; ++i) {
    auto n = co_await c.async_receive(asio::buffer(buf), use_awaitable);
    BOOST_TEST_REQUIRE(n == 100u);
    BOOST_TEST(static_cast<int>(buf[0]) == i);
  }
}

/// Spawns a receiver that sleeps `after`, then takes `count` numbered messages from `c`,
/// then (`then_eof`) the end of the stream; sets `done`.
void receive_late(ar::connection& c, std::chrono::milliseconds after, int count, bool then_eof,
                  bool& done) {
  asio::co_spawn(
      c.get_executor(),
      [&c, after, count, then_eof, &done]() -> awaitable<void> {
        co_await sleep_for(after);
        co_await receive_numbered(c, count);
        if (then_eof) {
          std::vector<std::byte> buf(64);
          auto [ec, n] = co_await c.async_receive(asio::buffer(buf), asio::as_tuple(use_awaitable));
          BOOST_TEST(ec == asio::error::eof, ec.message());
        }
        done = true;
      },
      ar::test::report_failure);
}

/// Spawns an echo on `c`: `rounds` times, receives a message (up to `max_size` bytes) and
/// sends it back.
void echo(ar::connection& c, int rounds, std::size_t max_size) {
  asio::co_spawn(
      c.get_executor(),
      [&c, rounds, max_size]() -> awaitable<void> {
        std::vector<std::byte> b(max_size);
        for (int i = 0; i < rounds; ++i) {
          auto n = co_await c.async_receive(asio::buffer(b), use_awaitable);
          co_await c.async_send(asio::buffer(b.data(), n), use_awaitable);
        }
      },
      ar::test::report_failure);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_send_completes_when_posted_without_waiting_for_the_peer) {
  // Four messages to a receiver that has room for two and takes none for 300 ms. Completed
  // at post, the third and fourth complete at once although the peer cannot take them yet
  // (its transport holds them back, retrying): the bytes left the caller. iWARP has no such
  // retry: the library's credits hold them in its queue, unposted, so they complete when
  // the peer has room, in either mode.
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(two_buffers(), completing(ar::send_completion::at_post));
    bool received = false;
    receive_late(p.server, 300ms, 4, false, received);
    auto took = co_await send_numbered(p.client, 4);
    BOOST_TEST_MESSAGE("sends took " << took[0] << ", " << took[1] << ", " << took[2] << ", "
                                     << took[3] << " ms");
    if (ar::test::remote_errors_reach_the_writer()) {
      for (double ms : took)
        BOOST_TEST(ms < 150.0, "a send completed at post took " << ms << " ms");
    } else {
      BOOST_TEST(took[2] > 150.0, "held back by credits, completed after " << took[2] << " ms");
    }
    co_await ar::test::wait_until(received);
    // Nothing waits on the requests: of four sends at most one asked for a completion
    // (on iWARP, completed on acknowledgement, each did).
    if (sends_complete_at_post_here())
      BOOST_TEST(p.client.statistics().signaled <= 1u);
    else
      BOOST_TEST(p.client.statistics().signaled == 4u);
  });
}

BOOST_AUTO_TEST_CASE(acknowledged_sends_complete_only_once_the_peer_took_them) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(two_buffers(), completing(ar::send_completion::at_acknowledgement));
    auto ex = co_await asio::this_coro::executor;
    const auto start = clock_type::now();
    clock_type::time_point receiving_from;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          co_await sleep_for(300ms);
          receiving_from = clock_type::now();
          co_await receive_numbered(p.server, 4);
        },
        ar::test::report_failure);
    auto took = co_await send_numbered(p.client, 4);
    // The third could not be acknowledged before the receiver (asleep for 300 ms) took a
    // message. (Measured against the sleep, not the receiver's clock reading: a send's
    // completion and that reading race by a millisecond.)
    const double third_done = took[0] + took[1] + took[2];
    const double receiving = std::chrono::duration<double, std::milli>(receiving_from - start).count();
    BOOST_TEST(third_done >= 250.0,
               "the third send completed after " << third_done << " ms, the receiver took its "
                                                 << "first message at " << receiving << " ms");
    BOOST_TEST(p.client.statistics().signaled == 4u); // each its own post, the last of it
  });
}

BOOST_AUTO_TEST_CASE(a_failure_after_a_completed_send_reaches_pending_and_later_operations) {
  // The peer's buffers are smaller than the message: RC cannot skip it, and the connection
  // fails on both sides. Completed at post, the send itself succeeded; the failure reaches
  // the receive already waiting and the send that follows, nothing hangs. (iWARP completes
  // no send at post: there the peer's end of the connection, its TERMINATE, may overtake
  // the send's own completion, and the send fails with it: seen once in an iwarp stage.)
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server = two_buffers(), client = completing(ar::send_completion::at_post);
    server.max_message_size = 1024;
    auto p = co_await make_pair(server, client);
    ar::error_code receive_error;
    bool receive_done = false;
    std::vector<std::byte> in(64);
    p.client.async_receive(asio::buffer(in), [&](ar::error_code ec, std::size_t) {
      receive_error = ec;
      receive_done = true;
    });
    std::vector<std::byte> big(2000, std::byte{7});
    auto [ec, n] = co_await p.client.async_send(asio::buffer(big), asio::as_tuple(use_awaitable));
    if (ar::test::remote_errors_reach_the_writer() || !ec) {
      BOOST_TEST(!ec, ec.message());
      BOOST_TEST(n == big.size());
    } else {
      BOOST_TEST_MESSAGE("the send, overtaken by the peer's end: " << ec.message());
    }
    co_await ar::test::wait_until(receive_done);
    BOOST_TEST(receive_error.failed());
    BOOST_TEST_MESSAGE("the pending receive: " << receive_error.message());
    if (ar::test::remote_errors_reach_the_writer())
      BOOST_TEST((receive_error == ar::wc_condition::remote), receive_error.message());
    auto [later, m] = co_await p.client.async_send(asio::buffer(in), asio::as_tuple(use_awaitable));
    BOOST_TEST(later.failed());
    if (ar::test::remote_errors_reach_the_writer())
      BOOST_TEST(later == receive_error, later.message());
    BOOST_TEST(!p.client.is_open());
  });
}

BOOST_AUTO_TEST_CASE(an_acknowledged_send_reports_its_own_error) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server, client = completing(ar::send_completion::at_acknowledgement);
    server.max_message_size = 1024;
    auto p = co_await make_pair(server, client);
    std::vector<std::byte> big(2000, std::byte{7});
    auto [ec, n] = co_await p.client.async_send(asio::buffer(big), asio::as_tuple(use_awaitable));
    if (!ar::test::remote_errors_reach_the_writer()) // iWARP: TCP took it, the peer ends it
      co_return co_await ar::test::expect_connection_ended_by_peer(p.client);
    BOOST_TEST((ec == ar::wc_condition::remote), ec.message());
    BOOST_TEST(n == 0u);
  });
}

BOOST_AUTO_TEST_CASE(close_right_after_completed_sends_still_delivers_them) {
  // Ten sends completed at post, most of them still held back by a receiver that takes
  // nothing for 200 ms, then close(): the close waits for the peer's acknowledgement
  // before it disconnects, so the receiver gets all ten, then the end of the stream.
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(two_buffers(), completing(ar::send_completion::at_post));
    bool received = false;
    receive_late(p.server, 200ms, 10, true, received);
    co_await send_numbered(p.client, 10);
    p.client.close();
    BOOST_TEST(!p.client.is_open());
    co_await ar::test::wait_until(received);
  });
}

BOOST_AUTO_TEST_CASE(async_disconnect_waits_for_completed_sends_to_arrive) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(two_buffers(), completing(ar::send_completion::at_post));
    bool received = false;
    receive_late(p.server, 200ms, 10, false, received);
    co_await send_numbered(p.client, 10);
    co_await p.client.async_disconnect(use_awaitable);
    BOOST_TEST(received);
  });
}

BOOST_AUTO_TEST_CASE(a_send_behind_an_unfinished_write_completes_after_it) {
  // RC's order kept: "write the data, send the notice, reuse the buffer when the notice
  // completes". A send posted behind a 4 MiB RDMA write still on its way completes on
  // acknowledgement, after the write; the next send, with nothing before it, at post.
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    const ar::connection_options server; // named: GCC 12 miscompiles braced temporaries in co_await
    auto p = co_await make_pair(server, completing(ar::send_completion::at_post));
    constexpr std::size_t size = 4 << 20;
    ar::memory_region target(p.server, size, ar::access::remote_write);
    ar::memory_region local(p.client, size, ar::access::local_write);
    auto remote = co_await ar::test::advertise(p, target);
    std::vector<std::string> order;
    int done = 0;
    bool both = false;
    p.client.async_write(local.slice(0, size), remote, [&](ar::error_code ec, std::size_t) {
      BOOST_TEST(!ec, ec.message());
      order.push_back("write");
      both = ++done == 2;
    });
    std::array<std::byte, 8> notice{};
    p.client.async_send(asio::buffer(notice), [&](ar::error_code ec, std::size_t) {
      BOOST_TEST(!ec, ec.message());
      order.push_back("send");
      both = ++done == 2;
    });
    co_await ar::test::wait_until(both);
    BOOST_TEST_REQUIRE(order.size() == 2u);
    BOOST_TEST(order[0] == "write");
    BOOST_TEST(order[1] == "send");
    // Nothing before it now: completed at post, it asks for no completion of its own.
    const auto before = p.client.statistics();
    co_await p.client.async_send(asio::buffer(notice), use_awaitable);
    if (sends_complete_at_post_here())
      BOOST_TEST(p.client.statistics().signaled == before.signaled);
    std::array<std::byte, 8> in{};
    for (int i = 0; i < 2; ++i)
      co_await p.server.async_receive(asio::buffer(in), use_awaitable);
  });
}

BOOST_AUTO_TEST_CASE(an_awaited_ping_pong_asks_one_completion_in_sixteen_sends) {
  // Nothing waits for the completion of a send completed at post: a ping-pong's sends ask
  // for one only to recycle the send queue.
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(completing(ar::send_completion::at_post),
                                completing(ar::send_completion::at_post));
    constexpr int rounds = 64;
    echo(p.server, rounds, 8);
    const auto before = p.client.statistics();
    std::array<std::byte, 8> b{};
    for (int i = 0; i < rounds; ++i) {
      b[0] = static_cast<std::byte>(i);
      co_await p.client.async_send(asio::buffer(b), use_awaitable);
      co_await p.client.async_receive(asio::buffer(b), use_awaitable);
      BOOST_TEST(static_cast<int>(b[0]) == i);
    }
    const auto after = p.client.statistics();
    BOOST_TEST(after.work_requests - before.work_requests == std::uint64_t(rounds));
    BOOST_TEST(after.signaled - before.signaled ==
               std::uint64_t(sends_complete_at_post_here() ? rounds / 16 : rounds));
  });
}

BOOST_AUTO_TEST_CASE(a_send_of_registered_memory_completes_with_its_work_completion) {
  // Whatever send_completion says, a zero-copy send completes when its work completion
  // arrives, each asking for one: a large one is read by the device until then, and an
  // inline one (its bytes in the work request), completed at post, made rdma_bench's
  // ping-pong on rxe0 faster with busy polling (0.96x) but slower with events (1.06x).
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(completing(ar::send_completion::at_post),
                                completing(ar::send_completion::at_post));
    constexpr int rounds = 64;
    constexpr std::size_t small = 8, large = 4096; // max_inline_data is 64 by default
    echo(p.server, 2 * rounds, large);
    ar::memory_region region(p.client, large, ar::access::local_write);
    std::vector<std::byte> in(large);
    for (std::size_t size : {small, large}) {
      const auto before = p.client.statistics();
      for (int i = 0; i < rounds; ++i) {
        region.data()[0] = static_cast<std::byte>(i);
        const auto sent = co_await p.client.async_send(region.slice(0, size), use_awaitable);
        BOOST_TEST(sent == size);
        const auto n = co_await p.client.async_receive(asio::buffer(in), use_awaitable);
        BOOST_TEST_REQUIRE(n == size);
        BOOST_TEST(static_cast<int>(in[0]) == i);
      }
      const auto after = p.client.statistics();
      const auto signaled = after.signaled - before.signaled;
      BOOST_TEST_MESSAGE(size << "-byte sends of registered memory: " << signaled
                              << " of " << rounds << " signalled");
      BOOST_TEST(signaled == std::uint64_t(rounds), size << " bytes");
    }
  });
}
