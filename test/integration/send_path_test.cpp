// The send path's promises on a real device, observed through
// connection::statistics(): inline sends below the threshold, the requests of
// one io_context turn chained into one post, selective signalling (and errors
// of unsignalled requests still reported), cancelling a queued send; and
// async_batch (many requests, one post, one handler).
#define BOOST_TEST_MODULE integration_send_path
#include "rdma_test.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::advertise;
using ar::test::make_pair;
using ar::test::pattern;
using ar::test::run;
using asio::awaitable;
using asio::use_awaitable;

namespace {

ar::connection_statistics operator-(const ar::connection_statistics& a,
                                    const ar::connection_statistics& b) {
  return {a.posts - b.posts, a.work_requests - b.work_requests, a.inline_sends - b.inline_sends,
          a.signaled - b.signaled};
}

/// Waits (polling the io_context) until `count` reaches `target`.
awaitable<void> wait_for(const std::size_t& count, std::size_t target) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (count < target && std::chrono::steady_clock::now() < deadline) {
    t.expires_after(std::chrono::milliseconds(2));
    co_await t.async_wait(use_awaitable);
  }
  BOOST_REQUIRE_MESSAGE(count >= target, "only " << count << " of " << target << " completed");
}

/// Receives `n` messages on `conn`; returns their first bytes (the senders'
/// message numbers).
awaitable<std::vector<int>> receive_numbers(ar::connection& conn, std::size_t n) {
  std::vector<int> numbers;
  std::vector<std::byte> buf(conn.options().max_message_size);
  for (std::size_t i = 0; i < n; ++i) {
    auto got = co_await conn.async_receive(asio::buffer(buf), use_awaitable);
    BOOST_REQUIRE(got > 0);
    numbers.push_back(static_cast<int>(buf[0]));
  }
  co_return numbers;
}

/// Sends that complete on acknowledgement: posted at once when the queue is idle, each
/// chain's last signalled (what the tests of that mode check).
ar::connection_options acknowledged() {
  ar::connection_options o;
  o.send_completion = ar::send_completion::at_acknowledgement;
  return o;
}

ar::connection_options with_inline(std::uint32_t bytes) {
  ar::connection_options o;
  o.max_inline_data = bytes;
  return o;
}

} // namespace

BOOST_AUTO_TEST_CASE(sends_up_to_max_inline_data_go_inline_and_larger_ones_do_not) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options;
    auto p = co_await make_pair(server_options, with_inline(64));
    std::vector<std::byte> msg(65);
    for (std::size_t i = 0; i < msg.size(); ++i)
      msg[i] = pattern(1, i);
    auto before = p.client.statistics();
    for (int i = 0; i < 5; ++i)
      co_await p.client.async_send(asio::buffer(msg.data(), 64), use_awaitable);
    auto small = p.client.statistics() - before;
    BOOST_TEST(small.work_requests == 5u);
    BOOST_TEST(small.inline_sends == 5u); // at the threshold: inline

    before = p.client.statistics();
    for (int i = 0; i < 5; ++i)
      co_await p.client.async_send(asio::buffer(msg), use_awaitable);
    auto large = p.client.statistics() - before;
    BOOST_TEST(large.work_requests == 5u);
    BOOST_TEST(large.inline_sends == 0u); // one byte over: copied to registered memory

    // Both kinds arrive intact.
    std::vector<std::byte> in(p.server.options().max_message_size);
    for (std::size_t expected : {64, 64, 64, 64, 64, 65, 65, 65, 65, 65}) {
      auto n = co_await p.server.async_receive(asio::buffer(in), use_awaitable);
      BOOST_TEST(n == expected);
      BOOST_TEST(std::memcmp(in.data(), msg.data(), n) == 0);
    }

    // max_inline_data = 0 turns inline sends off.
    auto q = co_await make_pair(server_options, with_inline(0));
    co_await q.client.async_send(asio::buffer(msg.data(), 8), use_awaitable);
    BOOST_TEST(q.client.statistics().work_requests == 1u);
    BOOST_TEST(q.client.statistics().inline_sends == 0u);
  });
}

BOOST_AUTO_TEST_CASE(small_zero_copy_sends_and_writes_go_inline_too) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options;
    auto p = co_await make_pair(server_options, with_inline(64));
    ar::memory_region target(p.server, 4096, ar::access::remote_write | ar::access::remote_read);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    for (std::size_t i = 0; i < 4096; ++i)
      local.data()[i] = pattern(2, i);
    auto remote = co_await advertise(p, target);
    auto before = p.client.statistics();
    co_await p.client.async_send(local.slice(0, 64), use_awaitable);
    co_await p.client.async_write(local.slice(64, 64), remote.slice(64, 64), use_awaitable);
    // iWARP has no immediate data (refused, checked in integration_one_sided): a plain write.
    const bool immediate = ar::test::device_under_test().immediate_data;
    if (immediate)
      co_await p.client.async_write_with_imm(local.slice(128, 16), remote.slice(128, 16), 3,
                                             use_awaitable);
    else
      co_await p.client.async_write(local.slice(128, 16), remote.slice(128, 16), use_awaitable);
    BOOST_TEST((p.client.statistics() - before).inline_sends == 3u);
    before = p.client.statistics();
    co_await p.client.async_send(local.slice(0, 65), use_awaitable); // one byte over
    co_await p.client.async_write(local.slice(256, 65), remote.slice(256, 65), use_awaitable);
    co_await p.client.async_read(local.slice(1024, 8), remote.slice(64, 8), use_awaitable);
    BOOST_TEST((p.client.statistics() - before).inline_sends == 0u);
    // Inline or not, the bytes arrive.
    std::vector<std::byte> in(p.server.options().max_message_size);
    BOOST_TEST(co_await p.server.async_receive(asio::buffer(in), use_awaitable) == 64u);
    BOOST_TEST(std::memcmp(in.data(), local.data().data(), 64) == 0);
    if (immediate) {
      auto msg = co_await p.server.async_receive_message(asio::buffer(in), use_awaitable);
      BOOST_TEST(msg.rdma_write);
      BOOST_TEST(msg.size == 16u);
    }
    BOOST_TEST(co_await p.server.async_receive(asio::buffer(in), use_awaitable) == 65u);
    BOOST_TEST(std::memcmp(in.data(), local.data().data(), 65) == 0);
    BOOST_TEST(std::memcmp(target.data().data() + 64, local.data().data() + 64, 64 + 16) == 0);
    BOOST_TEST(std::memcmp(target.data().data() + 256, local.data().data() + 256, 65) == 0);
    BOOST_TEST(std::memcmp(local.data().data() + 1024, local.data().data() + 64, 8) == 0);
  });
}

BOOST_AUTO_TEST_CASE(requests_initiated_in_one_turn_are_chained_into_one_post) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(acknowledged(), acknowledged());
    std::vector<std::byte> msg(100);
    // One at a time: every send finds the queue idle and is posted at once.
    auto before = p.client.statistics();
    for (int i = 0; i < 10; ++i)
      co_await p.client.async_send(asio::buffer(msg), use_awaitable);
    auto single = p.client.statistics() - before;
    BOOST_TEST(single.posts == 10u);
    BOOST_TEST(single.work_requests == 10u);

    // Twenty initiated in one turn: the first rings the doorbell at once (the
    // queue was idle), the other nineteen go together at the end of the turn.
    // (Each its own buffer: a send reads its buffer when it is posted.)
    std::vector<std::vector<std::byte>> messages(20, msg);
    before = p.client.statistics();
    std::size_t done = 0;
    for (int i = 0; i < 20; ++i) {
      messages[i][0] = static_cast<std::byte>(i);
      p.client.async_send(asio::buffer(messages[i]), [&](ar::error_code ec, std::size_t) {
        BOOST_TEST(!ec, ec.message());
        ++done;
      });
    }
    co_await wait_for(done, 20);
    auto batched = p.client.statistics() - before;
    BOOST_TEST(batched.posts == 2u);
    BOOST_TEST(batched.work_requests == 20u);

    auto numbers = co_await receive_numbers(p.server, 10 + 20);
    std::vector<int> expected(10, 0);
    for (int i = 0; i < 20; ++i)
      expected.push_back(i);
    BOOST_TEST(numbers == expected, boost::test_tools::per_element()); // in order, none lost
  });
}

BOOST_AUTO_TEST_CASE(one_request_in_sixteen_and_the_last_of_each_post_are_signalled) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(acknowledged(), acknowledged());
    std::vector<std::byte> msg(100);
    auto before = p.client.statistics();
    std::size_t done = 0;
    for (int i = 0; i < 40; ++i)
      p.client.async_send(asio::buffer(msg), [&](ar::error_code ec, std::size_t n) {
        BOOST_TEST(!ec, ec.message());
        BOOST_TEST(n == 100u);
        ++done;
      });
    co_await wait_for(done, 40);
    auto s = p.client.statistics() - before;
    // Post 1: the first request alone (signalled: the last of its post).
    // Post 2: 39 requests; the 16th, the 32nd and the last are signalled.
    BOOST_TEST(s.posts == 2u);
    BOOST_TEST(s.work_requests == 40u);
    BOOST_TEST(s.signaled == 4u);
    // Every handler ran with success although 36 requests had no completion.
    BOOST_TEST(done == 40u);
    co_await receive_numbers(p.server, 40);
  });
}

BOOST_AUTO_TEST_CASE(sends_completed_at_post_go_in_one_post_per_turn_and_ask_few_completions) {
  if (ar::test::device_under_test().transport == "iWARP") {
    // There sends complete on acknowledgement whatever the option says: as above.
    BOOST_TEST_MESSAGE("iWARP: send_completion::at_post is taken as at_acknowledgement");
  }
  const bool at_post = ar::test::device_under_test().transport != "iWARP";
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options o;
    o.send_completion = ar::send_completion::at_post;
    auto p = co_await make_pair(o, o);
    std::vector<std::byte> msg(100);
    auto before = p.client.statistics();
    std::size_t done = 0;
    for (int i = 0; i < 40; ++i)
      p.client.async_send(asio::buffer(msg), [&](ar::error_code ec, std::size_t n) {
        BOOST_TEST(!ec, ec.message());
        BOOST_TEST(n == 100u);
        ++done;
      });
    co_await wait_for(done, 40);
    auto s = p.client.statistics() - before;
    // All forty at the end of the turn, in one post; nothing waits on their completions:
    // the 16th and the 32nd ask for one, to recycle the send queue, the last does not.
    // (Completed on acknowledgement: the first alone, then 39; 16th, 32nd and last.)
    BOOST_TEST(s.posts == (at_post ? 1u : 2u));
    BOOST_TEST(s.work_requests == 40u);
    BOOST_TEST(s.signaled == (at_post ? 2u : 4u));
    co_await receive_numbers(p.server, 40);
  });
}

BOOST_AUTO_TEST_CASE(an_unsignalled_request_that_fails_is_reported_to_its_own_handler) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    auto wrong = remote;
    wrong.rkey ^= 0x5a5a; // not the region's key
    // Ten writes in one turn: the first is posted alone, the other nine in one
    // post of which only the last is signalled. The sixth (index 5) is the bad one.
    constexpr int count = 10, bad = 5;
    std::vector<ar::error_code> results(count);
    std::size_t done = 0;
    auto before = p.client.statistics();
    for (int i = 0; i < count; ++i)
      p.client.async_write(local.slice(std::size_t(i) * 64, 64),
                           (i == bad ? wrong : remote).slice(std::size_t(i) * 64, 64),
                           [&, i](ar::error_code ec, std::size_t) {
                             results[i] = ec;
                             ++done;
                           });
    co_await wait_for(done, count);
    auto s = p.client.statistics() - before;
    BOOST_TEST(s.posts == 2u);
    BOOST_TEST(s.signaled == 2u); // the bad request was not one of them
    if (!ar::test::remote_errors_reach_the_writer()) // iWARP
      co_return co_await ar::test::expect_connection_ended_by_peer(p.client);
    for (int i = 0; i < bad; ++i)
      BOOST_TEST(!results[i], i << ": " << results[i].message());
    BOOST_TEST((results[bad].category() == ar::wc_category()), results[bad].message());
    BOOST_TEST((results[bad] == ar::wc_condition::remote), results[bad].message());
    for (int i = bad + 1; i < count; ++i)
      BOOST_TEST(results[i].failed(), i); // flushed behind the failure
    BOOST_TEST(!p.client.is_open());
  });
}

BOOST_AUTO_TEST_CASE(a_cancelled_queued_send_completes_aborted_and_is_never_sent) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options, client_options;
    client_options.send_queue_depth = 1; // the second send has to wait in the library
    auto p = co_await make_pair(server_options, client_options);
    std::vector<std::byte> a(10, std::byte{1}), b(10, std::byte{2}), c(10, std::byte{3});
    std::vector<ar::error_code> results(3);
    std::size_t done = 0;
    asio::cancellation_signal cancel;
    auto handler = [&](int i) {
      return [&, i](ar::error_code ec, std::size_t) {
        results[i] = ec;
        ++done;
      };
    };
    p.client.async_send(asio::buffer(a), handler(0)); // posted: the queue was idle
    p.client.async_send(asio::buffer(b), asio::bind_cancellation_slot(cancel.slot(), handler(1)));
    p.client.async_send(asio::buffer(c), handler(2));
    cancel.emit(asio::cancellation_type::terminal); // b is still queued
    co_await wait_for(done, 3);
    BOOST_TEST(!results[0], results[0].message());
    BOOST_TEST(results[1] == asio::error::operation_aborted, results[1].message());
    BOOST_TEST(!results[2], results[2].message());
    BOOST_TEST(p.client.statistics().work_requests == 2u);
    // The receiver sees a then c: b never went out.
    auto numbers = co_await receive_numbers(p.server, 2);
    BOOST_TEST(numbers == std::vector<int>({1, 3}), boost::test_tools::per_element());
    BOOST_TEST(p.client.is_open());
  });
}

BOOST_AUTO_TEST_CASE(a_send_posted_at_once_is_not_withdrawn_by_cancellation) {
  // Posted RC work cannot be withdrawn alone: the send completes as sent. (A send that
  // completes at post is posted at the end of the turn: cancelled before, it is withdrawn.)
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair(acknowledged(), acknowledged());
    std::vector<std::byte> a(10, std::byte{7});
    asio::cancellation_signal cancel;
    ar::error_code result = asio::error::would_block;
    std::size_t done = 0;
    p.client.async_send(asio::buffer(a),
                        asio::bind_cancellation_slot(cancel.slot(), [&](ar::error_code ec, std::size_t) {
                          result = ec;
                          ++done;
                        }));
    cancel.emit(asio::cancellation_type::terminal);
    co_await wait_for(done, 1);
    BOOST_TEST(!result, result.message());
    auto numbers = co_await receive_numbers(p.server, 1);
    BOOST_TEST(numbers == std::vector<int>({7}), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(no_other_handler_runs_inside_an_initiating_function) {
  // async_receive polls the completion queue (messages may wait there). A send's
  // completion it finds is delivered from the io_context, never inside the caller's
  // async_receive call: Asio runs no handler inside an initiating function. Nor does a
  // send that completes at post, which that poll's end may post.
  for (auto mode : {ar::send_completion::at_acknowledgement, ar::send_completion::at_post}) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options o;
    o.send_completion = mode;
    auto p = co_await make_pair(o, o);
    std::vector<std::byte> out(8, std::byte{5}), in(8);
    bool inside_call = false, ran_inside = false;
    std::size_t sent = 0, received = 0;
    p.client.async_send(asio::buffer(out), [&](ar::error_code ec, std::size_t) {
      BOOST_TEST(!ec, ec.message());
      ran_inside = inside_call;
      ++sent;
    });
    // Block this handler (not an io_context turn): the send completes into the CQ meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    inside_call = true;
    p.client.async_receive(asio::buffer(in), [&](ar::error_code ec, std::size_t) {
      BOOST_TEST(!ec, ec.message());
      ++received;
    });
    inside_call = false;
    co_await wait_for(sent, 1);
    BOOST_TEST(!ran_inside);
    co_await p.server.async_send(asio::buffer(out), use_awaitable);
    co_await wait_for(received, 1);
  });
  }
}

// ---------------------------------------------------------------- async_batch

namespace {

/// A client-side region of `count` messages of `size` bytes, message i filled with i.
ar::memory_region numbered_messages(const ar::connection& conn, std::size_t count,
                                    std::size_t size) {
  ar::memory_region region(conn, count * size, ar::access::local_write);
  for (std::size_t i = 0; i < count; ++i)
    std::memset(region.data().data() + i * size, static_cast<int>(i), size);
  return region;
}

std::vector<ar::batch_entry> sends_of(const ar::memory_region& region, std::size_t first,
                                      std::size_t count, std::size_t size) {
  std::vector<ar::batch_entry> entries;
  for (std::size_t i = first; i < first + count; ++i)
    entries.push_back(ar::batch_entry::send(region.slice(i * size, size)));
  return entries;
}

std::vector<int> iota_from(int first, int count) {
  std::vector<int> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_batch_of_sends_is_one_post_and_arrives_in_order) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    constexpr std::size_t count = 40, size = 100;
    auto region = numbered_messages(p.client, count, size);
    auto entries = sends_of(region, 0, count, size);
    auto before = p.client.statistics();
    auto bytes = co_await p.client.async_batch(entries, use_awaitable);
    BOOST_TEST(bytes == count * size);
    auto s = p.client.statistics() - before;
    BOOST_TEST(s.posts == 1u); // one ibv_post_send for the whole batch
    BOOST_TEST(s.work_requests == count);
    BOOST_TEST(s.signaled == 3u); // the 16th, the 32nd and the last
    auto numbers = co_await receive_numbers(p.server, count);
    BOOST_TEST(numbers == iota_from(0, count), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(a_batch_of_writes_reads_and_a_write_with_immediate) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write | ar::access::remote_read);
    ar::memory_region local(p.client, 8192, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    for (std::size_t i = 0; i < 4096; ++i)
      local.data()[i] = pattern(3, i);
    // Four writes of 1 KiB, then a write with immediate over the first 16 bytes again.
    std::vector<ar::batch_entry> writes;
    for (std::size_t i = 0; i < 4; ++i)
      writes.push_back(
          ar::batch_entry::write(local.slice(i * 1024, 1024), remote.slice(i * 1024, 1024)));
    writes.push_back(ar::batch_entry::write_with_imm(local.slice(0, 16), remote.slice(0, 16), 77));
    if (!ar::test::device_under_test().immediate_data) {
      // iWARP: the whole batch is refused before anything is posted; plain writes go.
      auto [ec, n] = co_await p.client.async_batch(writes, asio::as_tuple(use_awaitable));
      BOOST_TEST((ec == ar::errc::operation_not_supported), ec.message());
      BOOST_TEST(n == 0u);
      writes.pop_back();
      BOOST_TEST(co_await p.client.async_batch(writes, use_awaitable) == 4096u);
      std::array<std::byte, 1> done{std::byte{1}}; // writes before a send have landed
      co_await p.client.async_send(asio::buffer(done), use_awaitable);
      co_await p.server.async_receive(asio::buffer(done), use_awaitable);
    } else {
      BOOST_TEST(co_await p.client.async_batch(writes, use_awaitable) == 4096u + 16u);
      std::array<std::byte, 8> unused;
      auto msg = co_await p.server.async_receive_message(asio::buffer(unused), use_awaitable);
      BOOST_TEST(msg.rdma_write);
      BOOST_TEST(msg.immediate.value_or(0) == 77u);
    }
    BOOST_TEST(std::memcmp(target.data().data(), local.data().data(), 4096) == 0);
    // Read it back in two halves, in reverse order.
    std::vector<ar::batch_entry> reads{
        ar::batch_entry::read(local.slice(4096 + 2048, 2048), remote.slice(2048, 2048)),
        ar::batch_entry::read(local.slice(4096, 2048), remote.slice(0, 2048))};
    BOOST_TEST(co_await p.client.async_batch(reads, use_awaitable) == 4096u);
    BOOST_TEST(std::memcmp(local.data().data() + 4096, target.data().data(), 4096) == 0);
  });
}

BOOST_AUTO_TEST_CASE(a_batch_is_checked_whole_before_anything_is_posted) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options, client_options;
    client_options.send_queue_depth = 8;
    client_options.max_message_size = 256;
    auto p = co_await make_pair(server_options, client_options);
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    auto region = numbered_messages(p.client, 8, 512);
    auto remote = co_await advertise(p, target);
    auto before = p.client.statistics();

    auto entries = sends_of(region, 0, 4, 100);
    entries[2] = ar::batch_entry::send(region.slice(4000, 200)); // out of bounds
    auto [e1, n1] = co_await p.client.async_batch(entries, asio::as_tuple(use_awaitable));
    BOOST_TEST(e1 == ar::errc::out_of_bounds, e1.message());
    entries[2] = ar::batch_entry::write(region.slice(0, 512), remote.slice(4000, 96));
    auto [e2, n2] = co_await p.client.async_batch(entries, asio::as_tuple(use_awaitable));
    BOOST_TEST(e2 == ar::errc::out_of_bounds, e2.message()); // longer than its remote range
    entries[2] = ar::batch_entry::send(region.slice(0, 512)); // over max_message_size
    auto [e3, n3] = co_await p.client.async_batch(entries, asio::as_tuple(use_awaitable));
    BOOST_TEST(e3 == ar::errc::message_too_large, e3.message());
    auto nine = sends_of(region, 0, 8, 10);
    nine.push_back(nine.front()); // more than the send queue holds
    auto [e4, n4] = co_await p.client.async_batch(nine, asio::as_tuple(use_awaitable));
    BOOST_TEST(e4 == asio::error::invalid_argument, e4.message());
    BOOST_TEST(n1 + n2 + n3 + n4 == 0u);
    BOOST_TEST((p.client.statistics() - before).work_requests == 0u); // nothing went out
    BOOST_TEST(p.client.is_open());

    // An empty batch completes at once; a good one still works.
    const std::span<const ar::batch_entry> none;
    BOOST_TEST(co_await p.client.async_batch(none, use_awaitable) == 0u);
    std::vector<ar::batch_entry> good{ar::batch_entry::send(region.slice(5 * 512, 100)),
                                      ar::batch_entry::send(region.slice(6 * 512, 100))};
    BOOST_TEST(co_await p.client.async_batch(good, use_awaitable) == 200u);
    auto numbers = co_await receive_numbers(p.server, 2);
    BOOST_TEST(numbers == std::vector<int>({5, 6}), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(a_bad_request_fails_its_batch_with_the_device_error) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    auto wrong = remote;
    wrong.rkey ^= 0x5a5a; // not the region's key
    std::vector<ar::batch_entry> writes;
    for (std::size_t i = 0; i < 10; ++i) // the sixth is unsignalled and bad
      writes.push_back(ar::batch_entry::write(local.slice(i * 64, 64),
                                              (i == 5 ? wrong : remote).slice(i * 64, 64)));
    auto [ec, n] = co_await p.client.async_batch(writes, asio::as_tuple(use_awaitable));
    if (!ar::test::remote_errors_reach_the_writer()) // iWARP
      co_return co_await ar::test::expect_connection_ended_by_peer(p.client);
    BOOST_TEST((ec.category() == ar::wc_category()), ec.message());
    BOOST_TEST((ec == ar::wc_condition::remote), ec.message()); // the first error, not a flush
    BOOST_TEST(n == 0u);
    BOOST_TEST(!p.client.is_open());
    auto [ec2, n2] = co_await p.client.async_batch(writes, asio::as_tuple(use_awaitable));
    BOOST_TEST(ec2 == ec, ec2.message()); // the connection reports its failure
  });
}

BOOST_AUTO_TEST_CASE(a_batch_waits_in_order_for_room_in_the_send_queue) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options, client_options;
    client_options.send_queue_depth = 8;
    auto p = co_await make_pair(server_options, client_options);
    auto region = numbered_messages(p.client, 20, 64);
    std::size_t done = 0;
    std::vector<int> order;
    auto note = [&](int id) {
      return [&, id](ar::error_code ec, std::size_t) {
        BOOST_TEST(!ec, ec.message());
        order.push_back(id);
        ++done;
      };
    };
    // Five singles fill part of the queue; the batch of eight gets the rest, then room.
    for (int i = 0; i < 5; ++i)
      p.client.async_send(region.slice(std::size_t(i) * 64, 64), note(i));
    auto entries = sends_of(region, 5, 8, 64);
    p.client.async_batch(entries, note(100));
    entries.clear(); // copied at initiation: the caller's vector may go
    for (int i = 13; i < 20; ++i)
      p.client.async_send(region.slice(std::size_t(i) * 64, 64), note(i));
    co_await wait_for(done, 5 + 1 + 7);
    std::vector<int> expected{0, 1, 2, 3, 4, 100, 13, 14, 15, 16, 17, 18, 19};
    BOOST_TEST(order == expected, boost::test_tools::per_element());
    auto numbers = co_await receive_numbers(p.server, 20);
    BOOST_TEST(numbers == iota_from(0, 20), boost::test_tools::per_element());
  });
}

BOOST_AUTO_TEST_CASE(a_queued_batch_is_withdrawn_whole_by_cancellation) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options server_options, client_options;
    client_options.send_queue_depth = 4;
    auto p = co_await make_pair(server_options, client_options);
    auto region = numbered_messages(p.client, 8, 16);
    std::vector<ar::error_code> results(3, asio::error::would_block);
    std::size_t done = 0;
    auto handler = [&](int i) {
      return [&, i](ar::error_code ec, std::size_t) {
        results[i] = ec;
        ++done;
      };
    };
    asio::cancellation_signal cancel;
    p.client.async_send(region.slice(0, 16), handler(0)); // posted: the queue was idle
    auto entries = sends_of(region, 1, 3, 16);
    p.client.async_batch(entries, asio::bind_cancellation_slot(cancel.slot(), handler(1)));
    p.client.async_send(region.slice(4 * 16, 16), handler(2));
    cancel.emit(asio::cancellation_type::terminal); // the batch still waits for the turn's end
    co_await wait_for(done, 3);
    BOOST_TEST(!results[0], results[0].message());
    BOOST_TEST(results[1] == asio::error::operation_aborted, results[1].message());
    BOOST_TEST(!results[2], results[2].message());
    BOOST_TEST(p.client.statistics().work_requests == 2u);
    auto numbers = co_await receive_numbers(p.server, 2);
    BOOST_TEST(numbers == std::vector<int>({0, 4}), boost::test_tools::per_element());
    BOOST_TEST(p.client.is_open());
  });
}
