// The two ways to run the library on several threads (docs/threading.md):
// one io_context run by four threads with every connection on its own strand,
// and one io_context per thread. Many connections send and receive at once;
// every byte is checked. A third case shares memory regions (and the device's
// protection domain) between threads that each run their own io_context.
// The sanitizer stage runs this under ThreadSanitizer. Boost.Test's
// assertions are not thread safe: worker threads only count, the test's own
// thread checks.
#define BOOST_TEST_MODULE integration_threads
#include "rdma_test.hpp"

#include <boost/asio/strand.hpp>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::pattern;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr std::size_t message_size = 512;

std::vector<std::byte> message(std::uint64_t connection, std::uint64_t seq) {
  std::vector<std::byte> m(1 + (connection * 97 + seq * 13) % message_size);
  for (std::size_t i = 0; i < m.size(); ++i)
    m[i] = pattern(connection * 100000 + seq, i);
  return m;
}

/// What the threads report; checked on the test's thread.
struct tally {
  std::atomic<std::uint64_t> echoed{0}; ///< echoes that matched their message
  std::atomic<std::uint64_t> wrong{0};  ///< echoes that did not, handlers off their strand
  std::atomic<int> clients_done{0};
  std::mutex mutex;
  std::vector<std::string> errors;
  std::set<std::thread::id> threads; ///< threads that ran client handlers

  void error(const std::string& what) {
    std::lock_guard lock(mutex);
    errors.push_back(what);
  }
  void ran_on_this_thread() {
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  }
};

auto count_errors(tally& t) {
  return [&t](std::exception_ptr e) {
    if (!e)
      return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      t.error(x.what());
    }
  };
}

/// Echoes every message until the peer disconnects.
awaitable<void> echo(ar::connection conn) {
  std::vector<std::byte> buf(message_size);
  for (;;) {
    auto [ec, n] = co_await conn.async_receive(asio::buffer(buf), asio::as_tuple(use_awaitable));
    if (ec)
      co_return;
    co_await conn.async_send(asio::buffer(buf.data(), n), use_awaitable);
  }
}

/// Accepts `count` connections and echoes on each (on the acceptor's executor).
awaitable<void> serve(ar::acceptor& acceptor, int count, tally& t) {
  for (int i = 0; i < count; ++i) {
    auto conn = co_await acceptor.async_accept(use_awaitable);
    asio::co_spawn(acceptor.get_executor(), echo(std::move(conn)), count_errors(t));
  }
}

/// One client connection on executor `ex` (its own strand, or a single-threaded
/// io_context): a sender keeps up to `depth` messages in flight while a
/// receiver checks the echoes in order; then it disconnects.
awaitable<void> client(std::uint64_t id, std::uint16_t port, std::uint64_t total, tally& t,
                       bool check_strand) {
  auto ex = co_await asio::this_coro::executor;
  ar::connection_options o;
  o.max_message_size = message_size;
  o.send_queue_depth = 8;
  o.receive_queue_depth = 16;
  auto conn = co_await ar::async_connect(ex, ar::test::device_address(), port, o, use_awaitable);
  using strand_type = asio::strand<asio::io_context::executor_type>;
  auto on_strand = [&] {
    t.ran_on_this_thread();
    const auto* strand = ex.target<strand_type>();
    if (check_strand && (!strand || !strand->running_in_this_thread()))
      ++t.wrong;
  };
  std::uint64_t sent = 0;
  asio::steady_timer sender_done(ex, asio::steady_timer::time_point::max());
  asio::co_spawn(
      ex,
      [&]() -> awaitable<void> {
        while (sent < total) {
          auto m = message(id, sent);
          co_await conn.async_send(asio::buffer(m), use_awaitable);
          on_strand();
          ++sent;
        }
      },
      [&](std::exception_ptr e) {
        count_errors(t)(e);
        sender_done.cancel();
      });
  std::vector<std::byte> in(message_size);
  for (std::uint64_t k = 0; k < total; ++k) {
    auto n = co_await conn.async_receive(asio::buffer(in), use_awaitable);
    on_strand();
    auto expect = message(id, k);
    if (n == expect.size() && std::equal(expect.begin(), expect.end(), in.begin()))
      ++t.echoed;
    else
      ++t.wrong;
  }
  if (sent < total)
    co_await sender_done.async_wait(asio::as_tuple(use_awaitable));
  co_await conn.async_disconnect(use_awaitable);
}

/// Runs `io` on `threads` threads until `done()`, then calls `finish()` and
/// lets the io_context run out of work (everything closed). Returns false if
/// either took longer than `limit`; the io_context is then stopped.
template <typename Done, typename Finish>
bool run_threads(asio::io_context& io, int threads, Done done, Finish finish,
                 std::chrono::seconds limit) {
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&io] { io.run(); });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  bool finished = done();
  finish();
  guard.reset();
  while (!io.stopped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  finished = finished && io.stopped();
  io.stop();
  for (auto& th : pool)
    th.join();
  return finished;
}

} // namespace

BOOST_AUTO_TEST_CASE(four_threads_one_io_context_every_connection_on_its_own_strand) {
  constexpr int threads = 4;
  constexpr int connections = 8;
  constexpr std::uint64_t total = 300; // messages per connection
  ar::test::device_address();          // fails here, not on a worker, when unset
  asio::io_context io(threads);
  tally t;
  // The acceptor and the connections it accepts share one strand; each client
  // connection has a strand of its own.
  ar::acceptor_options aopts;
  aopts.connection.max_message_size = message_size;
  aopts.connection.receive_queue_depth = 16;
  auto server_strand = asio::make_strand(io);
  ar::acceptor acceptor(server_strand, ar::test::device_address(), 0, aopts);
  const auto port = acceptor.local_endpoint().port();
  asio::co_spawn(server_strand, serve(acceptor, connections, t), count_errors(t));
  for (int c = 0; c < connections; ++c) {
    auto strand = asio::make_strand(io);
    asio::co_spawn(strand, client(c, port, total, t, true), [&t](std::exception_ptr e) {
      count_errors(t)(e);
      ++t.clients_done;
    });
  }
  const bool finished = run_threads(
      io, threads, [&] { return t.clients_done == connections; },
      [&] { asio::post(server_strand, [&] { acceptor.close(); }); }, std::chrono::seconds(300));
  BOOST_TEST(finished, "clients did not finish, or connections stayed open, within 300 s");
  for (const auto& e : t.errors)
    BOOST_ERROR(e);
  BOOST_TEST(t.echoed.load() == connections * total);
  BOOST_TEST(t.wrong.load() == 0u);
  BOOST_TEST_MESSAGE("client handlers ran on " << t.threads.size() << " threads");
  BOOST_TEST(t.threads.size() >= 2u, "the io_context's threads shared the work");
}

BOOST_AUTO_TEST_CASE(one_io_context_per_thread_each_with_its_own_acceptor_and_connections) {
  constexpr int threads = 4;
  constexpr int connections = 3; // per thread
  constexpr std::uint64_t total = 200;
  ar::test::device_address();
  tally t;
  std::vector<std::thread> pool;
  std::atomic<int> threads_done{0};
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      try {
        asio::io_context io(1);
        ar::acceptor_options aopts;
        aopts.connection.max_message_size = message_size;
        aopts.connection.receive_queue_depth = 16;
        ar::acceptor acceptor(io.get_executor(), ar::test::device_address(), 0, aopts);
        asio::co_spawn(io, serve(acceptor, connections, t), count_errors(t));
        int done = 0;
        for (int c = 0; c < connections; ++c)
          asio::co_spawn(
              io, client(i * connections + c, acceptor.local_endpoint().port(), total, t, false),
              [&](std::exception_ptr e) {
                count_errors(t)(e);
                ++t.clients_done;
                if (++done == connections)
                  acceptor.close();
              });
        io.run_for(std::chrono::seconds(300));
      } catch (const std::exception& e) {
        t.error(std::string("thread: ") + e.what());
      }
      ++threads_done;
    });
  for (auto& th : pool)
    th.join();
  BOOST_TEST(threads_done.load() == threads);
  BOOST_TEST(t.clients_done.load() == threads * connections);
  for (const auto& e : t.errors)
    BOOST_ERROR(e);
  BOOST_TEST(t.echoed.load() == threads * connections * total);
  BOOST_TEST(t.wrong.load() == 0u);
  BOOST_TEST(t.threads.size() == std::size_t(threads));
}

namespace {

/// One client thread of the shared-region test: its own io_context and
/// connection; RDMA writes from its slice of the shared `source` region to its
/// slice of the server's `target`, a fetch-add on the one counter all threads
/// share, and a read back into a region it registers itself (on the same
/// protection domain, from its own thread).
void region_client(int i, std::uint16_t port, const ar::memory_region& source, int rounds,
                   tally& t) {
  try {
    asio::io_context io(1);
    // Allowed from any thread (docs/threading.md): a device query.
    if (ar::list_devices().empty())
      t.error("list_devices found no device");
    const bool atomics = ar::test::device_under_test().has_atomics();
    asio::co_spawn(
        io,
        [&]() -> awaitable<void> {
          auto ex = co_await asio::this_coro::executor;
          ar::connection_options o;
          auto conn =
              co_await ar::async_connect(ex, ar::test::device_address(), port, o, use_awaitable);
          auto remote =
              co_await conn.async_receive_remote_buffer(std::chrono::seconds(60), use_awaitable);
          ar::memory_region back(conn, 4096, ar::access::local_write);
          const auto slice = static_cast<std::size_t>(i) * 4096;
          for (int r = 0; r < rounds; ++r) {
            co_await conn.async_write(source.slice(slice, 4096), remote.slice(slice, 4096),
                                      use_awaitable);
            if (atomics) {
              co_await conn.async_fetch_add(remote.slice(4 * 4096, 8), 1, use_awaitable);
            } else if (r == 0) { // iWARP: refused before anything is posted
              auto [aec, old] = co_await conn.async_fetch_add(remote.slice(4 * 4096, 8), 1,
                                                              asio::as_tuple(use_awaitable));
              if (aec != ar::errc::operation_not_supported)
                t.error("fetch_add without atomics: " + aec.message());
            }
            co_await conn.async_read(back.slice(), remote.slice(slice, 4096), use_awaitable);
            if (std::equal(back.data().begin(), back.data().end(), source.data().begin() + slice))
              ++t.echoed;
            else
              ++t.wrong;
          }
          co_await conn.async_send(asio::buffer("done", 4), use_awaitable);
          co_await conn.async_disconnect(use_awaitable);
        },
        count_errors(t));
    io.run_for(std::chrono::seconds(300));
  } catch (const std::exception& e) {
    t.error(std::string("client thread: ") + e.what());
  }
  ++t.clients_done;
}

} // namespace

// The promise of docs/threading.md for what is shared across threads: the
// device (its protection domain, from the device cache) and memory_region
// objects. Two regions registered once on the main thread serve four client
// threads and a server thread, each with its own io_context and connections.
BOOST_AUTO_TEST_CASE(memory_regions_shared_by_threads_each_with_its_own_io_context) {
  constexpr int clients = 4;
  constexpr int rounds = 50;
  ar::test::device_address();
  tally t;
  // The regions are registered on the device's protection domain, taken from a
  // connection that only serves to open the device (it outlives them; a
  // prepared_queue_pair would do, but iWARP has none).
  asio::io_context main_io(1);
  std::optional<ar::test::connected_pair> anchor_pair;
  asio::co_spawn(
      main_io,
      [&]() -> awaitable<void> {
        auto p = co_await ar::test::make_pair();
        anchor_pair.emplace(std::move(p));
      },
      ar::test::report_failure);
  while (!anchor_pair && main_io.run_one() > 0) // an open connection keeps awaiting CM events
    ;
  BOOST_REQUIRE(anchor_pair);
  const ar::connection& anchor = anchor_pair->client;
  ar::error_code ec;
  ar::memory_region target(anchor.native_protection_domain(), clients * 4096 + 8, ar::access::all,
                           ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  ar::memory_region source(anchor.native_protection_domain(), clients * 4096,
                           ar::access::local_write, ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  for (std::size_t k = 0; k < source.size(); ++k)
    source.data()[k] = pattern(k / 4096 + 1, k);

  // The server thread: advertises `target` to each client, then waits for its
  // word and its disconnect.
  asio::io_context server_io(1);
  ar::acceptor acceptor(server_io.get_executor(), ar::test::device_address(), 0);
  const auto port = acceptor.local_endpoint().port();
  asio::co_spawn(
      server_io,
      [&]() -> awaitable<void> {
        for (int c = 0; c < clients; ++c) {
          auto conn = co_await acceptor.async_accept(use_awaitable);
          asio::co_spawn(
              server_io,
              [&t, &target, conn = std::move(conn)]() mutable -> awaitable<void> {
                co_await conn.async_send_remote_buffer(target.remote(), use_awaitable);
                std::array<char, 8> word{};
                auto [e1, n] =
                    co_await conn.async_receive(asio::buffer(word), asio::as_tuple(use_awaitable));
                if (e1 || std::string(word.data(), n) != "done")
                  t.error("server: no 'done': " + e1.message());
                auto [e2, m] =
                    co_await conn.async_receive(asio::buffer(word), asio::as_tuple(use_awaitable));
                if (e2 != asio::error::eof)
                  t.error("server: wanted eof, got " + e2.message());
              },
              count_errors(t));
        }
        acceptor.close();
      },
      count_errors(t));
  std::thread server([&] { server_io.run_for(std::chrono::seconds(300)); });
  std::vector<std::thread> pool;
  for (int i = 0; i < clients; ++i)
    pool.emplace_back([&, i] { region_client(i, port, source, rounds, t); });
  for (auto& th : pool)
    th.join();
  server.join();

  for (const auto& e : t.errors)
    BOOST_ERROR(e);
  BOOST_TEST(t.clients_done.load() == clients);
  BOOST_TEST(t.echoed.load() == std::uint64_t(clients * rounds));
  BOOST_TEST(t.wrong.load() == 0u);
  std::uint64_t counter = 0;
  std::memcpy(&counter, target.data().data() + clients * 4096, 8);
  // No fetch-add lost (none made on a device without atomics, such as iWARP's).
  const bool atomics = ar::test::device_under_test().has_atomics();
  BOOST_TEST(counter == std::uint64_t(atomics ? clients * rounds : 0));
  BOOST_TEST(std::equal(source.data().begin(), source.data().end(), target.data().begin()));
}
