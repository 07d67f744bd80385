// Load on a real device: a thousand connections on one acceptor sharing one
// completion queue and one shared receive queue, and a soak of a million
// messages with memory that stays flat. Figures go to the log
// (--log_level=message) for the record; the assertions are the behaviour.
// CTest runs each case as a test of its own, by name (integration_load, alone in the
// guest, and integration_soak: test/integration/CMakeLists.txt): a new case needs its own.
#define BOOST_TEST_MODULE integration_load
#include "rdma_test.hpp"

#include <boost/asio/as_tuple.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <sys/prctl.h>
#include <sys/resource.h>

// Built with AddressSanitizer (GCC says so with a macro, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define ASIO_RDMA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASIO_RDMA_TEST_ASAN 1
#endif
#endif
#ifndef ASIO_RDMA_TEST_ASAN
#define ASIO_RDMA_TEST_ASAN 0
#endif

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::run;
using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

/// A field of /proc/self/status in KiB (VmRSS, VmPin: pinned = registered memory).
long status_kib(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stol(line.substr(field.size() + 1));
  return -1;
}

/// Resident memory measures what the process touched, and only that, without transparent
/// huge pages: the test VM's kernel has them on ("always"), and khugepaged, running in the
/// background, turns a sparsely touched 2 MiB stretch of the heap (after the
/// thousand-connection case malloc's heap keeps ~95 MiB free) into a whole resident huge
/// page. Measured with them on: VmRSS +15 MiB and AnonHugePages 0 -> 40 MiB over the
/// million messages, while malloc's bytes in use fell by 27 KiB and the program made 542
/// allocations in all (the test's own 50 ms timers); flat or not depended on where the
/// heap's holes happened to lie.
const bool huge_pages_off = ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0;

void raise_fd_limit(rlim_t want) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < want) {
    r.rlim_cur = std::min<rlim_t>(want, r.rlim_max == RLIM_INFINITY ? want : r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(use_awaitable);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_thousand_connections_share_one_cq_and_srq) {
  // SoftiWARP's provider holds about 144 pages of queues per process (docs/devices.md),
  // and both ends live in this one: forty pairs there, a thousand elsewhere.
  const int count = ar::test::is_softiwarp() ? 40 : 1000;
  const int wave_size = std::min(count, 100);
  raise_fd_limit(8192); // each client connection has a CM channel fd
  asio::io_context io;
  run(
      io,
      [&]() -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        const long rss_before = status_kib("VmRSS"), pin_before = status_kib("VmPin");
        ar::shared_queue_options so;
        so.receive_queue_depth = 2048;
        so.max_message_size = 256;
        so.completion_queue_size = 16384;
        ar::connection_options co;
        co.send_queue_depth = 4;
        co.max_message_size = 256;
        ar::acceptor_options ao;
        ao.connection = co;
        ao.connection.shared_queues = ar::shared_queues(ex, so);
        ao.backlog = 1024;
        ar::acceptor acceptor(ex, ar::test::device_address(), 0, ao);
        ar::connection_options client_options = co;
        client_options.shared_queues = ar::shared_queues(ex, so);

        // Server: accept all, echo each connection's messages until it ends.
        int served = 0, server_eofs = 0;
        asio::co_spawn(
            ex,
            [&]() -> awaitable<void> {
              for (int i = 0; i < count; ++i) {
                auto conn = co_await acceptor.async_accept(use_awaitable);
                ++served;
                asio::co_spawn(
                    ex,
                    [&, c = std::move(conn)]() mutable -> awaitable<void> {
                      std::array<std::byte, 256> buf{};
                      for (;;) {
                        auto [ec, n] = co_await c.async_receive(asio::buffer(buf),
                                                                asio::as_tuple(use_awaitable));
                        if (ec) {
                          BOOST_TEST((ec == asio::error::eof), ec.message());
                          ++server_eofs;
                          co_return;
                        }
                        co_await c.async_send(asio::buffer(buf.data(), n), use_awaitable);
                      }
                    },
                    ar::test::report_failure);
              }
            },
            ar::test::report_failure);

        // Clients: connect in waves of 100, each sends one message and gets it back.
        std::vector<ar::connection> clients(count);
        const auto port = acceptor.local_endpoint().port();
        int echoed = 0;
        for (int wave = 0; wave < count; wave += wave_size) {
          int connected = 0;
          for (int i = wave; i < wave + wave_size; ++i)
            asio::co_spawn(
                ex,
                [&, i]() -> awaitable<void> {
                  clients[i] = co_await ar::async_connect(ex, ar::test::device_address(), port,
                                                          client_options, use_awaitable);
                  ++connected;
                  std::array<std::byte, 64> out{}, in{};
                  out[0] = std::byte(i & 0xff);
                  out[1] = std::byte(i >> 8);
                  co_await clients[i].async_send(asio::buffer(out), use_awaitable);
                  co_await clients[i].async_receive(asio::buffer(in), use_awaitable);
                  BOOST_TEST((in == out));
                  ++echoed;
                },
                ar::test::report_failure);
          while (connected < wave_size)
            co_await sleep_for(10ms);
        }
        while (echoed < count)
          co_await sleep_for(10ms);
        const long rss_open = status_kib("VmRSS"), pin_open = status_kib("VmPin");
        BOOST_TEST(served == count);
        BOOST_TEST(ao.connection.shared_queues.connections() == std::size_t(count));
        BOOST_TEST_MESSAGE(count << " connections (both ends in this process): resident "
                                 << (rss_open - rss_before) / count << " KiB per connection pair, "
                                 << "registered (pinned) " << (pin_open - pin_before) / count
                                 << " KiB per connection pair; RSS " << rss_before << " -> "
                                 << rss_open << " KiB, pinned " << pin_before << " -> " << pin_open
                                 << " KiB");
        for (auto& c : clients)
          co_await c.async_disconnect(use_awaitable);
        while (server_eofs < count)
          co_await sleep_for(10ms);
        clients.clear();
        co_await sleep_for(200ms);
        BOOST_TEST(ao.connection.shared_queues.connections() == 0u);
        BOOST_TEST(client_options.shared_queues.connections() == 0u);
      },
      900s);
}

BOOST_AUTO_TEST_CASE(a_million_messages_with_flat_memory) {
  constexpr int connections = 4, senders = 8;
  // 10^6 by default; the sanitizer stage runs fewer (ASIO_RDMA_SOAK_MESSAGES), as its
  // point there is memory errors, not the figure, and the iwarp stage half (scaled()).
  const char* env = std::getenv("ASIO_RDMA_SOAK_MESSAGES");
  const long total =
      env ? std::max(100'000L, std::atol(env)) : long(ar::test::scaled(1'000'000, 100'000));
  asio::io_context io;
  run(
      io,
      [&]() -> awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        ar::connection_options o;
        o.max_message_size = 256;
        std::vector<ar::test::connected_pair> pairs;
        std::vector<ar::connection*> server, client;
        for (int i = 0; i < connections; ++i)
          pairs.push_back(co_await ar::test::make_pair(o, o));
        for (auto& p : pairs) {
          server.push_back(&p.server);
          client.push_back(&p.client);
        }
        long received = 0, sent = 0;
        long rss_start = 0;
        const long per_connection = total / connections;
        int finished = 0;
        for (int i = 0; i < connections; ++i) {
          asio::co_spawn(
              ex,
              [&, i]() -> awaitable<void> {
                std::array<std::byte, 64> buf{};
                for (long n = 0; n < per_connection; ++n) {
                  co_await server[i]->async_receive(asio::buffer(buf), use_awaitable);
                  if (++received == 20'000)
                    rss_start = status_kib("VmRSS"); // warmed up: pools and queues at size
                }
                ++finished;
              },
              ar::test::report_failure);
          for (int s = 0; s < senders; ++s)
            asio::co_spawn(
                ex,
                [&, i, s]() -> awaitable<void> {
                  std::array<std::byte, 64> msg{};
                  for (long n = s; n < per_connection; n += senders) {
                    co_await client[i]->async_send(asio::buffer(msg), use_awaitable);
                    ++sent;
                  }
                },
                ar::test::report_failure);
        }
        auto start = std::chrono::steady_clock::now();
        while (finished < connections)
          co_await sleep_for(50ms);
        const long rss_end = status_kib("VmRSS");
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        BOOST_TEST_MESSAGE(received << " messages in " << seconds << " s; RSS after 20,000: "
                                    << rss_start << " KiB, at the end: " << rss_end << " KiB");
        BOOST_TEST(received == total);
#if ASIO_RDMA_TEST_ASAN
        // AddressSanitizer holds freed blocks in its quarantine (256 MiB) on
        // purpose, so resident memory grows under it whatever the library does:
        // the figure is only meaningful, and asserted, in the plain build.
        BOOST_TEST_MESSAGE("RSS growth under AddressSanitizer: " << rss_end - rss_start << " KiB");
#else
        BOOST_TEST(huge_pages_off);
        BOOST_TEST(rss_end - rss_start < 1024); // flat: less than 1 MiB of growth
#endif
        for (auto* c : client)
          co_await c->async_disconnect(use_awaitable);
      },
      900s);
}
