// Helpers for integration tests: the device address to use and a bounded
// runner for coroutine test bodies.
#pragma once

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>

namespace asio_rdma::test {

namespace asio = boost::asio;

/// The IPv4 address of the RDMA device under test (test/vm/run.sh sets it).
/// Integration tests fail, never skip, without one.
inline std::string device_address() {
  const char* addr = std::getenv("ASIO_RDMA_TEST_ADDR");
  if (!addr || !*addr)
    BOOST_FAIL("ASIO_RDMA_TEST_ADDR is not set: run integration tests through test/vm/run.sh "
               "(SoftRoCE VM or a local RDMA device)");
  return addr;
}

/// `full`, or the share of it that ASIO_RDMA_TEST_VOLUME (a fraction in (0, 1], default 1)
/// asks for, but at least `at_least`: the count of calls, bytes or rounds of a test whose
/// point needs volume. The sanitizer stage runs a fifth (scripts/test_sanitized.sh): it
/// looks for memory and race errors, which the first fifth of the volume shows as well as
/// the rest, at three to four times the cost per byte under AddressSanitizer. The iwarp
/// stage runs half (scripts/test.sh): the integration stage runs the whole on rxe0.
inline std::size_t scaled(std::size_t full, std::size_t at_least = 1) {
  const char* text = std::getenv("ASIO_RDMA_TEST_VOLUME");
  const double share = text && *text ? std::strtod(text, nullptr) : 1.0;
  if (!(share > 0 && share <= 1)) // also NaN
    BOOST_FAIL("ASIO_RDMA_TEST_VOLUME must be a fraction in (0, 1]");
  return std::max(at_least, static_cast<std::size_t>(double(full) * share));
}

/// The device under test (ASIO_RDMA_DEVICE, set by test/vm/run.sh): what it supports
/// decides what some tests expect (iWARP has no immediate data and no datagrams: there the
/// tests check the clear refusal instead).
inline device_info device_under_test() {
  const char* name = std::getenv("ASIO_RDMA_DEVICE");
  if (!name || !*name)
    BOOST_FAIL("ASIO_RDMA_DEVICE is not set: run integration tests through test/vm/run.sh");
  return query_device(name);
}

/// Whether the device under test is SoftiWARP (siw: iWARP in software, vendor id "bmt"),
/// whose provider holds only about 144 pages of queues per process (docs/devices.md): tests
/// of many connections in one process use fewer there and check the refusal beyond.
inline bool is_softiwarp() {
  const device_info d = device_under_test();
  return d.transport == "iWARP" && d.vendor_id == 0x626d74;
}

/// Whether `ec`'s message names the device under test and `what` (the capability or the
/// limit it lacks): a refusal must say which device and why, not only "not supported".
inline bool names_the_device(const error_code& ec, std::string_view what) {
  const std::string message = ec.message();
  return message.find(device_under_test().name) != std::string::npos &&
         message.find(what) != std::string::npos;
}

/// Whether an error at the peer's end of a write (a wrong key, a missing permission) is
/// reported to the write itself. iWARP completes a write once its transport (TCP) has
/// it: the peer then ends the connection, and the writer learns only that.
inline bool remote_errors_reach_the_writer() {
  return device_under_test().transport != "iWARP";
}

/// Where remote errors do not reach the writer: checks that its connection ends all the
/// same, soon and clearly (a pending receive fails instead of waiting for ever).
inline asio::awaitable<void> expect_connection_ended_by_peer(connection& c) {
  std::array<std::byte, 64> unused;
  auto [ec, n] = co_await c.async_receive(asio::buffer(unused), asio::as_tuple(asio::use_awaitable));
  BOOST_TEST_MESSAGE("the writer's connection ended: " << ec.message());
  BOOST_TEST(ec.failed());
  BOOST_TEST(!c.is_open());
}

/// Runs `body()` (an awaitable) on `io` until it finishes; fails the test if
/// it throws or has not finished within `limit` (nothing may hang). With
/// `handlers_run`, counts there the handlers the io_context runs meanwhile.
template <typename Body>
void run(asio::io_context& io, Body body, std::chrono::seconds limit = std::chrono::seconds(120),
         std::size_t* handlers_run = nullptr) {
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
  });
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!finished && std::chrono::steady_clock::now() < deadline && !io.stopped()) {
    const std::size_t ran = io.run_one_until(deadline);
    if (handlers_run)
      *handlers_run += ran; // read by the body as it runs: the handlers before its own
  }
  BOOST_REQUIRE_MESSAGE(finished, "test body did not finish within " << limit.count() << " s");
  if (failure)
    std::rethrow_exception(failure);
  // Let teardown (flushes, disconnect events) settle so the next test starts clean.
  io.run_for(std::chrono::milliseconds(50));
}

/// Marks the measured part of a body run by count_handlers().
struct handler_meter {
  const std::size_t* handlers; // run so far
  std::size_t at_start = 0, counted = 0;
  void start() { at_start = *handlers; }
  void stop() { counted = *handlers - at_start; }
};

/// Runs `body(meter)` (a coroutine, through run()) and returns how many handlers the
/// io_context ran between its meter.start() and meter.stop(): what a part of it costs in
/// wake-ups and posted tasks.
template <typename Body> std::size_t count_handlers(asio::io_context& io, Body body) {
  std::size_t handlers = 0;
  handler_meter meter{&handlers};
  run(io, [&]() -> asio::awaitable<void> { co_await body(meter); }, std::chrono::seconds(120),
      &handlers);
  return meter.counted;
}

/// Completion handler for co_spawn'ed helpers: an exception fails the test
/// instead of vanishing (as it would with asio::detached).
inline void report_failure(std::exception_ptr e) {
  if (!e)
    return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    BOOST_ERROR("spawned coroutine failed: " << x.what());
  }
}

/// Waits `d` on the current coroutine's executor.
inline asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

/// Until `flag` is set (by a coroutine spawned beside this one).
inline asio::awaitable<void> wait_until(const bool& flag) {
  while (!flag)
    co_await sleep_for(std::chrono::milliseconds(1));
}

/// The memory this process has pinned (registered with a device), from the kernel's count
/// (VmPin in /proc/self/status), in bytes.
inline std::size_t pinned_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmPin:", 0) == 0)
      return std::stoul(line.substr(6)) * 1024; // "VmPin:     1234 kB"
  return 0;
}

/// Byte i of test message `seq`.
inline std::byte pattern(std::uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7 + 1) & 0xff);
}

} // namespace asio_rdma::test

namespace asio_rdma::test {

/// Two ends of one connection on the device under test.
struct connected_pair {
  asio_rdma::acceptor acceptor;
  asio_rdma::connection server;
  asio_rdma::connection client;
};

/// Listens on an ephemeral port, connects to it and accepts, concurrently.
/// (Options by value and no `{}` defaults: GCC 12 mishandles brace-initialised
/// temporaries inside co_await expressions.)
inline asio::awaitable<connected_pair> make_pair(connection_options server_options,
                                                 connection_options client_options) {
  auto ex = co_await asio::this_coro::executor;
  acceptor_options aopts;
  aopts.connection = server_options;
  connected_pair p{acceptor(ex, device_address(), 0, aopts), {}, {}};
  bool accepted = false;
  std::exception_ptr accept_error;
  asio::steady_timer accepted_signal(ex, asio::steady_timer::time_point::max());
  asio::co_spawn(ex, p.acceptor.async_accept(asio::use_awaitable),
                 [&](std::exception_ptr e, connection c) {
                   accept_error = e;
                   p.server = std::move(c);
                   accepted = true;
                   accepted_signal.cancel();
                 });
  p.client = co_await async_connect(ex, device_address(), p.acceptor.local_endpoint().port(),
                                    client_options, asio::use_awaitable);
  if (!accepted)
    co_await accepted_signal.async_wait(asio::as_tuple(asio::use_awaitable));
  if (accept_error)
    std::rethrow_exception(accept_error);
  co_return std::move(p);
}

inline asio::awaitable<connected_pair> make_pair() {
  connection_options defaults;
  co_return co_await make_pair(defaults, defaults);
}

/// The server advertises `region` (async_send_remote_buffer); the client receives it.
inline asio::awaitable<remote_buffer> advertise(connected_pair& p, const memory_region& region) {
  co_await p.server.async_send_remote_buffer(region.remote(), asio::use_awaitable);
  co_return co_await p.client.async_receive_remote_buffer(std::chrono::seconds(10),
                                                          asio::use_awaitable);
}

} // namespace asio_rdma::test
