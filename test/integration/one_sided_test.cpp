// One-sided operations on a real device: RDMA write/read, immediate data,
// atomics, scatter/gather, bounds and permission checks, deep pipelines.
#define BOOST_TEST_MODULE integration_one_sided
#include "rdma_test.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <infiniband/verbs.h> // IBV_WC_REM_ACCESS_ERR

#include <array>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using ar::test::advertise;
using ar::test::make_pair;
using ar::test::pattern;
using ar::test::run;

namespace {

void fill(std::span<std::byte> s, std::uint64_t seq) {
  for (std::size_t i = 0; i < s.size(); ++i)
    s[i] = pattern(seq, i);
}

bool matches(std::span<const std::byte> s, std::uint64_t seq) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] != pattern(seq, i))
      return false;
  return true;
}

} // namespace

BOOST_AUTO_TEST_CASE(write_then_read_back) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 8192, ar::access::remote_write | ar::access::remote_read);
    ar::memory_region local(p.client, 8192, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    BOOST_TEST(remote.length == 8192u);
    BOOST_TEST(remote.rkey == target.rkey());
    fill(local.data().first(4096), 11);
    auto n = co_await p.client.async_write(local.slice(0, 4096), remote.slice(1000, 4096),
                                           use_awaitable);
    BOOST_TEST(n == 4096u);
    BOOST_TEST(matches(target.data().subspan(1000, 4096), 11)); // landed byte for byte
    std::memset(local.data().data(), 0, local.size());
    n = co_await p.client.async_read(local.slice(4096, 4096), remote.slice(1000, 4096),
                                     use_awaitable);
    BOOST_TEST(n == 4096u);
    BOOST_TEST(matches(local.data().subspan(4096, 4096), 11));
  });
}

BOOST_AUTO_TEST_CASE(error_code_overloads_register_whatever_the_code_held_before) {
  // Asio's rule for error_code overloads: the code says how this call went, so one that
  // holds an earlier failure is cleared on success (it made registration skip itself).
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    std::vector<std::byte> plain(4096);
    boost::system::error_code ec = asio::error::not_connected;
    ar::memory_region user(p.client, std::span(plain), ar::access::local_write, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(user.is_registered());
    ec = asio::error::not_connected;
    ar::memory_region owned(p.client, 4096, ar::access::local_write, ec);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(owned.is_registered());
  });
}

BOOST_AUTO_TEST_CASE(read_of_region_the_peer_filled) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region source(p.server, 65536, ar::access::remote_read);
    fill(source.data(), 99);
    std::vector<std::byte> plain(65536);
    ar::memory_region local(p.client, std::span(plain), ar::access::local_write); // user memory
    auto remote = co_await advertise(p, source);
    auto n = co_await p.client.async_read(local.slice(), remote, use_awaitable);
    BOOST_TEST(n == 65536u);
    BOOST_TEST(matches(plain, 99));
  });
}

BOOST_AUTO_TEST_CASE(a_read_has_its_data_when_it_completes_though_later_sends_complete_first) {
  // iWARP (SoftiWARP) completes a send when TCP has it and a read when its response has
  // arrived, so sends posted after a read complete before it: none of those completions
  // may complete the read early (its destination would still be filling).
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    constexpr std::size_t reads = 32, each = 256 * 1024;
    auto p = co_await make_pair();
    ar::memory_region source(p.server, reads * each, ar::access::remote_read);
    for (std::size_t i = 0; i < reads; ++i)
      fill(source.data().subspan(i * each, each), i);
    ar::memory_region local(p.client, reads * each,
                            ar::access::local_write | ar::access::remote_write);
    auto remote = co_await advertise(p, source);
    int received = 0, sent = 0, intact = 0, completed = 0;
    bool all = false;
    std::array<std::byte, 8> in{};
    std::function<void()> receive = [&] {
      p.server.async_receive(asio::buffer(in), [&](boost::system::error_code ec, std::size_t) {
        if (!ec && ++received < int(reads))
          receive();
      });
    };
    receive();
    const std::array<std::byte, 8> note{};
    for (std::size_t i = 0; i < reads; ++i) {
      p.client.async_read(local.slice(i * each, each), remote.slice(i * each, each),
                          [&, i](boost::system::error_code ec, std::size_t n) {
                            if (!ec && n == each && matches(local.data().subspan(i * each, each), i))
                              ++intact;
                            if (++completed == int(reads))
                              all = true;
                          });
      p.client.async_send(asio::buffer(note), [&](boost::system::error_code ec, std::size_t) {
        sent += !ec;
      });
    }
    co_await ar::test::wait_until(all);
    BOOST_TEST(intact == int(reads));
    for (int i = 0; i < 1000 && received < int(reads); ++i)
      co_await ar::test::sleep_for(std::chrono::milliseconds(5));
    BOOST_TEST(sent == int(reads));
    BOOST_TEST(received == int(reads));
  });
}

BOOST_AUTO_TEST_CASE(write_with_immediate_is_seen_by_the_receiver) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    ar::memory_region local(p.client, 4096, ar::access::none);
    fill(local.data(), 5);
    auto remote = co_await advertise(p, target);
    if (!ar::test::device_under_test().immediate_data) {
      // Needs immediate data, which iWARP lacks: refused before anything is posted,
      // and the connection goes on.
      auto [ec, n] = co_await p.client.async_write_with_imm(local.slice(0, 1000), remote, 1,
                                                             asio::as_tuple(use_awaitable));
      BOOST_TEST((ec == ar::errc::operation_not_supported), ec.message());
      BOOST_TEST(ar::test::names_the_device(ec, "immediate"), ec.message());
      auto [sec, sn] = co_await p.client.async_send_with_imm(asio::buffer("imm", 3), 42,
                                                              asio::as_tuple(use_awaitable));
      BOOST_TEST((sec == ar::errc::operation_not_supported), sec.message());
      co_await p.client.async_write(local.slice(0, 1000), remote, use_awaitable);
      BOOST_TEST(matches(target.data().first(1000), 5));
      co_return;
    }
    co_await p.client.async_write_with_imm(local.slice(0, 1000), remote, 0xdeadbeef,
                                           use_awaitable);
    std::array<std::byte, 16> unused;
    auto msg = co_await p.server.async_receive_message(asio::buffer(unused), use_awaitable);
    BOOST_TEST(msg.size == 1000u);
    BOOST_TEST(msg.rdma_write);
    BOOST_TEST_REQUIRE(msg.immediate.has_value());
    BOOST_TEST(*msg.immediate == 0xdeadbeefu);
    BOOST_TEST(matches(target.data().first(1000), 5));
    // send with immediate, through the ordinary copy path
    co_await p.client.async_send_with_imm(asio::buffer("imm", 3), 42, use_awaitable);
    std::array<char, 8> buf{};
    msg = co_await p.server.async_receive_message(asio::buffer(buf), use_awaitable);
    BOOST_TEST(msg.size == 3u);
    BOOST_TEST(!msg.rdma_write);
    BOOST_TEST(msg.immediate.value_or(0) == 42u);
    BOOST_TEST(std::string(buf.data(), 3) == "imm");
  });
}

namespace {

/// On a device without atomics (siw: atomic_capability::none), checks that both atomics
/// are refused before anything is posted and the connection goes on; returns false then.
awaitable<bool> atomics_or_their_refusal(ar::connection& client, const ar::remote_buffer& remote) {
  if (ar::test::device_under_test().has_atomics())
    co_return true;
  auto [ec, v] = co_await client.async_fetch_add(remote, 1, asio::as_tuple(use_awaitable));
  BOOST_TEST((ec == ar::errc::operation_not_supported), ec.message());
  BOOST_TEST(ar::test::names_the_device(ec, "atomic"), ec.message());
  auto [cec, cv] = co_await client.async_compare_swap(remote, 0, 1, asio::as_tuple(use_awaitable));
  BOOST_TEST((cec == ar::errc::operation_not_supported), cec.message());
  co_await client.async_send(asio::buffer("still open", 10), use_awaitable);
  co_return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(fetch_add_from_eight_coroutines_ends_at_exact_sum) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await make_pair();
    ar::memory_region counter(p.server, 8, ar::access::remote_atomic | ar::access::remote_read);
    auto remote = co_await advertise(p, counter);
    if (!co_await atomics_or_their_refusal(p.client, remote))
      co_return;
    constexpr int coroutines = 8, each = 50;
    std::set<std::uint64_t> previous; // every fetch-add sees a distinct old value
    int done = 0;
    asio::steady_timer all(ex, asio::steady_timer::time_point::max());
    for (int c = 0; c < coroutines; ++c)
      asio::co_spawn(ex, [&, c]() -> awaitable<void> {
        for (int i = 0; i < each; ++i)
          previous.insert(co_await p.client.async_fetch_add(remote, c + 1, use_awaitable));
      }, [&](std::exception_ptr e) {
        ar::test::report_failure(e);
        if (++done == coroutines)
          all.cancel();
      });
    if (done < coroutines)
      co_await all.async_wait(asio::as_tuple(use_awaitable));
    std::uint64_t value;
    std::memcpy(&value, counter.data().data(), 8);
    BOOST_TEST(value == std::uint64_t(each) * (coroutines * (coroutines + 1) / 2));
    BOOST_TEST(previous.size() == std::size_t(coroutines * each));
  });
}

BOOST_AUTO_TEST_CASE(compare_swap_has_exactly_one_winner) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto p = co_await make_pair();
    ar::memory_region word(p.server, 8, ar::access::remote_atomic);
    auto remote = co_await advertise(p, word);
    if (!co_await atomics_or_their_refusal(p.client, remote))
      co_return;
    int winners = 0, done = 0;
    std::uint64_t winner_value = 0;
    asio::steady_timer all(ex, asio::steady_timer::time_point::max());
    for (std::uint64_t c = 1; c <= 8; ++c)
      asio::co_spawn(ex, [&, c]() -> awaitable<void> {
        auto old = co_await p.client.async_compare_swap(remote, 0, c, use_awaitable);
        if (old == 0) {
          ++winners;
          winner_value = c;
        }
      }, [&](std::exception_ptr e) {
        ar::test::report_failure(e);
        if (++done == 8)
          all.cancel();
      });
    if (done < 8)
      co_await all.async_wait(asio::as_tuple(use_awaitable));
    std::uint64_t value;
    std::memcpy(&value, word.data().data(), 8);
    BOOST_TEST(winners == 1);
    BOOST_TEST(value == winner_value);
  });
}

BOOST_AUTO_TEST_CASE(scatter_gather_with_three_entries) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write | ar::access::remote_read);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    fill(local.data(), 3);
    auto remote = co_await advertise(p, target);
    // Gather three pieces of local memory into one contiguous remote range.
    std::array<ar::local_buffer, 3> gather{local.slice(0, 100), local.slice(1000, 200),
                                           local.slice(3000, 300)};
    auto n = co_await p.client.async_write(gather, remote, use_awaitable);
    BOOST_TEST(n == 600u);
    auto t = target.data();
    BOOST_TEST(std::memcmp(t.data(), local.data().data(), 100) == 0);
    BOOST_TEST(std::memcmp(t.data() + 100, local.data().data() + 1000, 200) == 0);
    BOOST_TEST(std::memcmp(t.data() + 300, local.data().data() + 3000, 300) == 0);
    // Scatter it back into three other places.
    ar::memory_region back(p.client, 4096, ar::access::local_write);
    std::array<ar::local_buffer, 3> scatter{back.slice(10, 300), back.slice(2000, 200),
                                            back.slice(4000, 96)};
    if (ar::test::device_under_test().limits.max_sge_rd < 3) {
      // siw reads into one entry (it used to fill the first and report success): more
      // are refused before anything is posted.
      auto [ec, r] = co_await p.client.async_read(scatter, remote.slice(0, 596),
                                                  asio::as_tuple(use_awaitable));
      BOOST_TEST((ec == asio::error::invalid_argument), ec.message());
    } else {
      BOOST_TEST(co_await p.client.async_read(scatter, remote.slice(0, 596), use_awaitable) ==
                 596u);
      BOOST_TEST(std::memcmp(back.data().data() + 10, t.data(), 300) == 0);
      BOOST_TEST(std::memcmp(back.data().data() + 2000, t.data() + 300, 200) == 0);
      BOOST_TEST(std::memcmp(back.data().data() + 4000, t.data() + 500, 96) == 0);
    }
    // Zero-copy send gathered from three entries.
    n = co_await p.client.async_send(std::span<const ar::local_buffer>(gather), use_awaitable);
    std::vector<std::byte> in(1000);
    BOOST_TEST(co_await p.server.async_receive(asio::buffer(in), use_awaitable) == 600u);
    BOOST_TEST(std::memcmp(in.data() + 100, local.data().data() + 1000, 200) == 0);
  });
}

BOOST_AUTO_TEST_CASE(out_of_bounds_and_misaligned_are_refused_before_posting) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::all);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    auto bad_slice = local.slice(4000, 200);
    BOOST_TEST(!bad_slice.in_bounds);
    auto [e1, n1] = co_await p.client.async_write(bad_slice, remote, asio::as_tuple(use_awaitable));
    BOOST_TEST(e1 == ar::errc::out_of_bounds, e1.message());
    auto [e2, n2] = co_await p.client.async_write(local.slice(0, 2048), remote.slice(3000, 1096),
                                                  asio::as_tuple(use_awaitable));
    BOOST_TEST(e2 == ar::errc::out_of_bounds, e2.message()); // longer than the remote range
    auto [e3, v3] = co_await p.client.async_fetch_add(remote.slice(4, 8), 1,
                                                      asio::as_tuple(use_awaitable));
    BOOST_TEST(e3 == ar::errc::misaligned, e3.message());
    auto [e4, v4] = co_await p.client.async_fetch_add(remote.slice(0, 4), 1,
                                                      asio::as_tuple(use_awaitable));
    BOOST_TEST(e4 == ar::errc::out_of_bounds, e4.message());
    BOOST_TEST(p.client.is_open()); // nothing was posted
    BOOST_TEST(co_await p.client.async_write(local.slice(0, 8), remote, use_awaitable) == 8u);
  });
}

BOOST_AUTO_TEST_CASE(wrong_rkey_fails_with_remote_access_error_and_fails_the_connection) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    auto remote = co_await advertise(p, target);
    remote.rkey ^= 0x5a5a; // not the region's key
    auto [ec, n] = co_await p.client.async_write(local.slice(0, 64), remote,
                                                 asio::as_tuple(use_awaitable));
    BOOST_TEST_MESSAGE("wrong rkey: " << ec.message());
    if (!ar::test::remote_errors_reach_the_writer()) { // iWARP
      co_await ar::test::expect_connection_ended_by_peer(p.client);
      auto [ec2, n2] = co_await p.client.async_write(local.slice(0, 64), remote,
                                                     asio::as_tuple(use_awaitable));
      BOOST_TEST(ec2.failed(), ec2.message());
      co_return;
    }
    BOOST_TEST((ec.category() == ar::wc_category()));
    BOOST_TEST((ec == ar::wc_condition::remote), ec.message());
    BOOST_TEST(!p.client.is_open());
    auto [ec2, n2] = co_await p.client.async_write(local.slice(0, 64), remote,
                                                   asio::as_tuple(use_awaitable));
    BOOST_TEST(ec2 == ec, ec2.message()); // the connection reports its failure
  });
}

BOOST_AUTO_TEST_CASE(write_without_remote_write_permission_fails) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::memory_region read_only(p.server, 4096, ar::access::remote_read);
    ar::memory_region local(p.client, 4096, ar::access::local_write);
    auto remote = co_await advertise(p, read_only);
    BOOST_TEST(co_await p.client.async_read(local.slice(0, 64), remote, use_awaitable) == 64u);
    auto [ec, n] = co_await p.client.async_write(local.slice(0, 64), remote,
                                                 asio::as_tuple(use_awaitable));
    if (!ar::test::remote_errors_reach_the_writer()) // iWARP
      co_return co_await ar::test::expect_connection_ended_by_peer(p.client);
    BOOST_TEST(ec.value() == IBV_WC_REM_ACCESS_ERR, ec.message());
    BOOST_TEST((ec.category() == ar::wc_category()));
  });
}

BOOST_AUTO_TEST_CASE(ten_thousand_one_sided_operations_in_flight_from_sixteen_coroutines) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::connection_options o;
    o.send_queue_depth = 128; // far fewer than in flight: the rest queue in order
    auto p = co_await make_pair(o, o);
    constexpr int coroutines = 16, each = 625; // 10,000 writes, all initiated at once
    ar::memory_region target(p.server, coroutines * each * 8, ar::access::remote_write);
    ar::memory_region local(p.client, coroutines * each * 8, ar::access::local_write);
    for (std::size_t i = 0; i < coroutines * each; ++i) {
      std::uint64_t v = i * 2654435761u + 1;
      std::memcpy(local.data().data() + i * 8, &v, 8);
    }
    auto remote = co_await advertise(p, target);
    int ok = 0, finished = 0;
    asio::steady_timer all(ex, asio::steady_timer::time_point::max());
    for (int c = 0; c < coroutines; ++c)
      asio::co_spawn(ex, [&, c]() -> awaitable<void> {
        int pending = each;
        asio::steady_timer mine(ex, asio::steady_timer::time_point::max());
        for (int i = 0; i < each; ++i) { // initiate all, then wait
          std::size_t slot = std::size_t(c) * each + i;
          p.client.async_write(local.slice(slot * 8, 8), remote.slice(slot * 8, 8),
                               [&](boost::system::error_code ec, std::size_t n) {
                                 if (!ec && n == 8)
                                   ++ok;
                                 if (--pending == 0)
                                   mine.cancel();
                               });
        }
        if (pending > 0)
          co_await mine.async_wait(asio::as_tuple(use_awaitable));
      }, [&](std::exception_ptr e) {
        ar::test::report_failure(e);
        if (++finished == coroutines)
          all.cancel();
      });
    if (finished < coroutines)
      co_await all.async_wait(asio::as_tuple(use_awaitable));
    BOOST_TEST(ok == coroutines * each);
    BOOST_TEST(std::memcmp(target.data().data(), local.data().data(), local.size()) == 0);
  }, std::chrono::seconds(300));
}

BOOST_AUTO_TEST_CASE(advertisement_timeout_and_malformed_advertisement) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    auto [e1, r1] = co_await p.client.async_receive_remote_buffer(
        std::chrono::milliseconds(200), asio::as_tuple(use_awaitable));
    BOOST_TEST(e1 == asio::error::timed_out, e1.message());
    co_await p.server.async_send(asio::buffer("short", 5), use_awaitable); // truncated
    auto [e2, r2] = co_await p.client.async_receive_remote_buffer(
        std::chrono::seconds(10), asio::as_tuple(use_awaitable));
    BOOST_TEST(e2 == ar::errc::protocol_error, e2.message());
    // Longer than any advertisement: a protocol error too, not a truncation.
    std::array<std::byte, 100> long_message{};
    co_await p.server.async_send(asio::buffer(long_message), use_awaitable);
    auto [e3, r3] = co_await p.client.async_receive_remote_buffer(
        std::chrono::seconds(10), asio::as_tuple(use_awaitable));
    BOOST_TEST(e3 == ar::errc::protocol_error, e3.message());
    // As with async_receive's buffer_too_small, the message stays queued for
    // a receive that can hold it.
    std::array<std::byte, 128> big{};
    BOOST_TEST(co_await p.client.async_receive(asio::buffer(big), use_awaitable) == 100u);
    // The caller's cancellation, of any type (partial here), ends the wait.
    asio::cancellation_signal cancel;
    asio::steady_timer soon(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
    soon.async_wait([&](const ar::error_code&) { cancel.emit(asio::cancellation_type::partial); });
    auto [e4, r4] = co_await p.client.async_receive_remote_buffer(
        std::chrono::seconds(10),
        asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(use_awaitable)));
    BOOST_TEST(e4 == asio::error::operation_aborted, e4.message());
    BOOST_TEST(p.client.is_open());
    // After all of that, a real advertisement still arrives intact.
    ar::memory_region region(p.server, 4096, ar::access::remote_write);
    BOOST_TEST((co_await advertise(p, region) == region.remote()));
  });
}

BOOST_AUTO_TEST_CASE(each_completion_mode_completes_every_operation) {
  for (auto mode : {ar::completion_mode::event, ar::completion_mode::busy_poll,
                    ar::completion_mode::adaptive}) {
    BOOST_TEST_CONTEXT("completion mode " << static_cast<int>(mode)) {
      asio::io_context io;
      run(io, [&]() -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        ar::connection_options o;
        o.completion_mode = mode;
        o.adaptive_spin = std::chrono::microseconds(500);
        auto p = co_await make_pair(o, o);
        ar::memory_region target(p.server, 64 * 1024, ar::access::remote_write);
        ar::memory_region local(p.client, 64 * 1024, ar::access::local_write);
        fill(local.data(), 77);
        auto remote = co_await advertise(p, target);
        // Pipelined messages in both directions and one-sided writes.
        constexpr int messages = 300;
        int echoed = 0;
        asio::co_spawn(ex, [&]() -> awaitable<void> {
          std::array<std::byte, 256> buf;
          for (int i = 0; i < messages; ++i) {
            auto n = co_await p.server.async_receive(asio::buffer(buf), use_awaitable);
            co_await p.server.async_send(asio::buffer(buf.data(), n), use_awaitable);
          }
        }, ar::test::report_failure);
        for (int i = 0; i < messages; ++i) {
          std::array<std::byte, 256> out, in;
          fill(out, i);
          co_await p.client.async_send(asio::buffer(out), use_awaitable);
          co_await p.client.async_receive(asio::buffer(in), use_awaitable);
          if (matches(in, i))
            ++echoed;
        }
        BOOST_TEST(echoed == messages);
        for (int i = 0; i < 16; ++i)
          co_await p.client.async_write(local.slice(i * 4096, 4096), remote.slice(i * 4096, 4096),
                                        use_awaitable);
        BOOST_TEST(matches(target.data(), 77));
      });
    }
  }
}

BOOST_AUTO_TEST_CASE(buffer_pool_leases_registered_buffers_and_takes_them_back) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::buffer_pool pool(p.client, 1024, 4, ar::access::local_write);
    ar::memory_region target(p.server, 4096, ar::access::remote_write);
    auto remote = co_await advertise(p, target);
    {
      std::vector<ar::buffer_pool::lease> leases;
      while (auto l = pool.try_acquire())
        leases.push_back(std::move(*l));
      BOOST_TEST(leases.size() == 4u);
      BOOST_TEST(pool.available() == 0u);
      for (std::size_t i = 0; i < leases.size(); ++i) {
        fill(leases[i].data(), 40 + i);
        co_await p.client.async_write(leases[i].local(), remote.slice(i * 1024, 1024),
                                      use_awaitable);
      }
      for (std::size_t i = 0; i < 4; ++i)
        BOOST_TEST(matches(target.data().subspan(i * 1024, 1024), 40 + i));
      // zero-copy send straight from a leased buffer
      co_await p.client.async_send(leases[0].local(100), use_awaitable);
      std::array<std::byte, 128> in;
      BOOST_TEST(co_await p.server.async_receive(asio::buffer(in), use_awaitable) == 100u);
      BOOST_TEST(matches(std::span(in).first(100), 40));
    }
    BOOST_TEST(pool.available() == 4u); // every lease came back
  });
}

BOOST_AUTO_TEST_CASE(a_moved_buffer_pool_keeps_its_leases_valid) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_pair();
    ar::buffer_pool first(p.client, 256, 2, ar::access::local_write);
    auto lease = first.try_acquire();
    BOOST_TEST_REQUIRE(lease.has_value());
    const auto* bytes = lease->data().data();
    // The lease was taken from `first`; the pool moves on while it is out.
    ar::buffer_pool moved(std::move(first));
    BOOST_TEST(first.available() == 0u);
    BOOST_TEST(first.capacity() == 0u);
    BOOST_TEST(!first.try_acquire().has_value());
    BOOST_TEST(moved.available() == 1u);
    BOOST_TEST(lease->data().data() == bytes);
    fill(lease->data(), 7);
    co_await p.client.async_send(lease->local(200), use_awaitable);
    std::array<std::byte, 256> in;
    BOOST_TEST(co_await p.server.async_receive(asio::buffer(in), use_awaitable) == 200u);
    BOOST_TEST(matches(std::span(in).first(200), 7));
    lease.reset(); // returns to the pool it now lives in
    BOOST_TEST(moved.available() == 2u);
  });
}

BOOST_AUTO_TEST_CASE(shared_cq_and_srq_serve_twenty_connections) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    constexpr int n = 20, messages = 20;
    ar::shared_queue_options so;
    so.receive_queue_depth = 64; // far fewer buffers than 20 connections x 64
    so.max_message_size = 1024;
    // Room for every send queue (20 x 16) and the receive queue, and no more: siw cannot
    // grow it, and 16384 entries took 129 of the about 144 pages of queues siw maps into a
    // process, whether the rest fit then depending on the order of creation (docs/devices.md).
    so.completion_queue_size = 512;
    ar::shared_queues shared(ex, so);
    ar::acceptor_options aopts;
    aopts.connection.shared_queues = shared;
    aopts.connection.max_message_size = 1024;
    aopts.connection.send_queue_depth = 16;
    ar::acceptor acceptor(ex, ar::test::device_address(), 0, aopts);
    const auto port = acceptor.local_endpoint().port();
    int echoed_total = 0;
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      for (int i = 0; i < n; ++i) {
        auto conn = co_await acceptor.async_accept(use_awaitable);
        // Every other connection echoes from the shared receive queue's buffer itself
        // (async_receive_lent), the rest from a copy.
        const bool in_place = i % 2 == 1;
        asio::co_spawn(
            ex,
            [&, in_place, c = std::move(conn)]() mutable -> awaitable<void> {
              std::array<std::byte, 1024> buf;
              for (;;) {
                ar::lent_message lent;
                ar::error_code ec;
                asio::const_buffer echo;
                if (in_place) {
                  std::tie(ec, lent) = co_await c.async_receive_lent(asio::as_tuple(use_awaitable));
                  echo = lent.data();
                } else {
                  std::size_t m = 0;
                  std::tie(ec, m) =
                      co_await c.async_receive(asio::buffer(buf), asio::as_tuple(use_awaitable));
                  echo = asio::buffer(buf.data(), m);
                }
                if (ec == asio::error::eof)
                  co_return;
                if (ec)
                  throw boost::system::system_error(ec);
                co_await c.async_send(echo, use_awaitable);
                ++echoed_total;
              }
            },
            ar::test::report_failure);
      }
    }, ar::test::report_failure);

    int verified = 0, finished = 0;
    asio::steady_timer all(ex, asio::steady_timer::time_point::max());
    for (int i = 0; i < n; ++i)
      asio::co_spawn(ex, [&, i]() -> awaitable<void> {
        ar::connection_options o;
        o.max_message_size = 1024;
        // One message in flight: small queues, so that forty connections fit in the queue
        // pages siw's provider can map for one process (docs/devices.md).
        o.send_queue_depth = 16;
        o.receive_queue_depth = 16;
        auto c = co_await ar::async_connect(ex, ar::test::device_address(), port, o, use_awaitable);
        for (int k = 0; k < messages; ++k) {
          std::array<std::byte, 512> out, in;
          fill(out, i * 1000 + k);
          co_await c.async_send(asio::buffer(out), use_awaitable);
          auto m = co_await c.async_receive(asio::buffer(in), use_awaitable);
          if (m == 512 && matches(in, i * 1000 + k))
            ++verified;
        }
        co_await c.async_disconnect(use_awaitable);
      }, [&](std::exception_ptr e) {
        ar::test::report_failure(e);
        if (++finished == n)
          all.cancel();
      });
    if (finished < n)
      co_await all.async_wait(asio::as_tuple(use_awaitable));
    BOOST_TEST(verified == n * messages);
    BOOST_TEST(echoed_total == n * messages);
    for (int i = 0; i < 100 && shared.connections() > 0; ++i) { // server sides close on eof
      asio::steady_timer t(ex, std::chrono::milliseconds(20));
      co_await t.async_wait(use_awaitable);
    }
    BOOST_TEST(shared.connections() == 0u);
  }, std::chrono::seconds(300));
}
