// Reliable connections without rdma_cm (prepared_queue_pair): endpoints
// exchanged over a TCP socket on the same io_context, then every kind of
// connection operation; malformed and mismatched endpoints; closing.
#define BOOST_TEST_MODULE integration_out_of_band
#include "rdma_test.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::run;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

namespace {

constexpr auto as_tuple = asio::as_tuple(use_awaitable);

ar::queue_pair_location location() {
  ar::queue_pair_location where;
  if (const char* dev = std::getenv("ASIO_RDMA_DEVICE"))
    where.device = dev;
  return where;
}

using endpoint_bytes = std::array<std::byte, ar::queue_pair_endpoint::encoded_size>;

/// One side of the handshake over `tcp`: send our endpoint, read theirs,
/// connect, then trade one byte meaning "connected" so that neither sends
/// before the other's queue pair is ready to receive.
awaitable<ar::connection> handshake(tcp::socket& tcp, ar::prepared_queue_pair& qp) {
  auto mine = qp.endpoint().to_bytes();
  co_await asio::async_write(tcp, asio::buffer(mine), use_awaitable);
  endpoint_bytes theirs{};
  co_await asio::async_read(tcp, asio::buffer(theirs), use_awaitable);
  auto conn = qp.connect(ar::queue_pair_endpoint::from_bytes(theirs));
  std::array<char, 1> ready{'r'};
  co_await asio::async_write(tcp, asio::buffer(ready), use_awaitable);
  co_await asio::async_read(tcp, asio::buffer(ready), use_awaitable);
  co_return conn;
}

/// iWARP queue pairs connect only through rdma_cm (over TCP): there a prepared queue pair
/// is refused with errc::operation_not_supported (checked here) and the test, which
/// needs one, ends.
bool out_of_band_or_its_refusal() {
  if (ar::test::device_under_test().transport != "iWARP")
    return true;
  asio::io_context io;
  ar::error_code ec;
  ar::prepared_queue_pair refused(io.get_executor(), location(), {}, ec);
  BOOST_TEST((ec == ar::errc::operation_not_supported), ec.message());
  BOOST_TEST(ar::test::names_the_device(ec, "iWARP"), ec.message());
  BOOST_TEST(!refused.is_open());
  return false;
}

struct oob_pair {
  ar::connection server;
  ar::connection client;
};

/// Two out-of-band connected ends, the endpoints exchanged over TCP on the
/// device's address, all on the caller's io_context.
awaitable<oob_pair> make_oob_pair(ar::connection_options options) {
  auto ex = co_await asio::this_coro::executor;
  tcp::acceptor listener(ex, tcp::endpoint(asio::ip::make_address(ar::test::device_address()), 0));
  tcp::socket server_tcp(ex), client_tcp(ex);
  ar::prepared_queue_pair server_qp(ex, location(), options);
  ar::prepared_queue_pair client_qp(ex, location(), options);
  BOOST_TEST(server_qp.is_open());
  BOOST_TEST(server_qp.endpoint().qp_num != client_qp.endpoint().qp_num);
  BOOST_TEST(!server_qp.endpoint().check());

  oob_pair p;
  bool server_done = false;
  std::exception_ptr server_error;
  asio::steady_timer done_signal(ex, asio::steady_timer::time_point::max());
  asio::co_spawn(
      ex,
      [&]() -> awaitable<void> {
        co_await listener.async_accept(server_tcp, use_awaitable);
        p.server = co_await handshake(server_tcp, server_qp);
      },
      [&](std::exception_ptr e) {
        server_error = e;
        server_done = true;
        done_signal.cancel();
      });
  co_await client_tcp.async_connect(listener.local_endpoint(), use_awaitable);
  p.client = co_await handshake(client_tcp, client_qp);
  if (!server_done)
    co_await done_signal.async_wait(as_tuple);
  if (server_error)
    std::rethrow_exception(server_error);
  BOOST_TEST(!server_qp.is_open()); // became the connection
  co_return std::move(p);
}

awaitable<oob_pair> make_oob_pair() {
  ar::connection_options defaults;
  co_return co_await make_oob_pair(defaults);
}

/// This process's open file descriptors (each connection has its completion channel's).
std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& fd : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

/// The server's last send completes at post, so as far as it knows that send may not be
/// acknowledged yet: its close lingers (up to 2 s) for a peer that has already gone. Then
/// either the io_context runs until the close has finished, or it is destroyed during it.
void close_lingering(bool run_until_closed) {
  asio::io_context io;
  ar::connection_options options;
  options.send_completion = ar::send_completion::at_post;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_oob_pair(options);
    co_await p.server.async_send(asio::buffer("pong", 4), use_awaitable);
    std::array<char, 8> in{};
    co_await p.client.async_receive(asio::buffer(in), use_awaitable);
    co_await p.client.async_disconnect(use_awaitable);
    p.server.close();
  });
  if (run_until_closed)
    io.run();
}

} // namespace

BOOST_AUTO_TEST_CASE(every_operation_over_an_out_of_band_connection) {
  if (!out_of_band_or_its_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_oob_pair();
    BOOST_REQUIRE(p.server.is_open());
    BOOST_REQUIRE(p.client.is_open());
    BOOST_TEST(p.client.native_handle() == nullptr); // no rdma_cm id
    BOOST_TEST(p.client.native_queue_pair() != nullptr);

    // send / receive, both ways
    const std::string hello = "hello, out of band";
    co_await p.client.async_send(asio::buffer(hello), use_awaitable);
    std::vector<char> in(256);
    auto n = co_await p.server.async_receive(asio::buffer(in), use_awaitable);
    BOOST_TEST(std::string(in.data(), n) == hello);
    co_await p.server.async_send(asio::buffer("pong", 4), use_awaitable);
    n = co_await p.client.async_receive(asio::buffer(in), use_awaitable);
    BOOST_TEST(std::string(in.data(), n) == "pong");

    // RDMA write and read on the server's region, advertised over the connection
    ar::memory_region target(p.server, 8192, ar::access::all);
    ar::memory_region local(p.client, 8192, ar::access::local_write);
    co_await p.server.async_send_remote_buffer(target.remote(), use_awaitable);
    auto remote =
        co_await p.client.async_receive_remote_buffer(std::chrono::seconds(10), use_awaitable);
    BOOST_TEST(remote.rkey == target.rkey());
    for (std::size_t i = 0; i < 4096; ++i)
      local.data()[i] = ar::test::pattern(5, i);
    n = co_await p.client.async_write(local.slice(0, 4096), remote.slice(0, 4096), use_awaitable);
    BOOST_TEST(n == 4096u);
    BOOST_TEST(std::memcmp(target.data().data(), local.data().data(), 4096) == 0);
    for (std::size_t i = 0; i < 4096; ++i)
      target.data()[4096 + i] = ar::test::pattern(9, i);
    n = co_await p.client.async_read(local.slice(4096, 4096), remote.slice(4096, 4096),
                                     use_awaitable);
    BOOST_TEST(n == 4096u);
    BOOST_TEST(std::memcmp(target.data().data() + 4096, local.data().data() + 4096, 4096) == 0);

    // RDMA write with immediate: the server's next receive reports it
    co_await p.client.async_write_with_imm(local.slice(0, 100), remote.slice(0, 100), 0xabcd,
                                           use_awaitable);
    auto message = co_await p.server.async_receive_message(asio::buffer(in), use_awaitable);
    BOOST_TEST(message.rdma_write);
    BOOST_TEST(message.immediate.value_or(0) == 0xabcdu);
    BOOST_TEST(message.size == 100u);

    // atomics on an 8-byte word of the server's region
    std::uint64_t seed = 40;
    std::memcpy(target.data().data(), &seed, 8);
    auto before = co_await p.client.async_fetch_add(remote.slice(0, 8), 2, use_awaitable);
    BOOST_TEST(before == 40u);
    auto swapped = co_await p.client.async_compare_swap(remote.slice(0, 8), 42, 7, use_awaitable);
    BOOST_TEST(swapped == 42u);
    std::uint64_t now = 0;
    std::memcpy(&now, target.data().data(), 8);
    BOOST_TEST(now == 7u);

    // a graceful disconnect completes at once (no CM to wait for)
    auto started = std::chrono::steady_clock::now();
    co_await p.client.async_disconnect(use_awaitable);
    BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(2)));
    BOOST_TEST(!p.client.is_open());
    auto [ec, sent] = co_await p.client.async_send(asio::buffer("x", 1), as_tuple);
    BOOST_TEST(ec == asio::error::not_connected);
    p.server.close();
  });
}

BOOST_AUTO_TEST_CASE(close_flushes_a_pending_receive) {
  if (!out_of_band_or_its_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto p = co_await make_oob_pair();
    std::vector<char> in(64);
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer closer(ex, std::chrono::milliseconds(100));
    closer.async_wait([&](ar::error_code) { p.server.close(); });
    auto [ec, n] = co_await p.server.async_receive(asio::buffer(in), as_tuple);
    BOOST_TEST(ec == asio::error::operation_aborted);
    BOOST_TEST(!p.server.is_open());
    p.client.close();
  });
}

// Asio's rule: destroying the io_context releases its objects. A closing connection keeps
// itself alive until the device is done with its memory; the io_context's destruction ends
// that, so nothing leaks (its queue pair, registered memory, completion channel).
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_while_a_close_lingers_releases_the_connection) {
  if (!out_of_band_or_its_refusal())
    return;
  close_lingering(true); // opens what the process keeps open (the device)
  const auto before = open_fds();
  close_lingering(true);
  BOOST_TEST(open_fds() == before);
  close_lingering(false);
  BOOST_TEST(open_fds() == before);
}

BOOST_AUTO_TEST_CASE(malformed_and_mismatched_endpoints_are_refused) {
  if (!out_of_band_or_its_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::connection_options options;
    ar::prepared_queue_pair a(ex, location(), options);
    ar::prepared_queue_pair b(ex, location(), options);
    const auto good = b.endpoint().to_bytes();
    ar::error_code ec;

    // truncated, wrong magic, a later version, QP number 0
    ar::queue_pair_endpoint::from_bytes(std::span(good).first(20), ec);
    BOOST_TEST(ec == ar::errc::bad_endpoint);
    auto bytes = good;
    bytes[0] = std::byte{'X'};
    ar::queue_pair_endpoint::from_bytes(bytes, ec);
    BOOST_TEST(ec == ar::errc::bad_endpoint);
    bytes = good;
    bytes[2] = std::byte{2};
    ar::queue_pair_endpoint::from_bytes(bytes, ec);
    BOOST_TEST(ec == ar::errc::bad_endpoint);
    BOOST_CHECK_THROW(ar::queue_pair_endpoint::from_bytes(std::span(good).first(39)),
                      boost::system::system_error);

    // Built by hand: refused by connect, and `a` stays usable.
    auto bad = b.endpoint();
    bad.qp_num = 0;
    auto conn = a.connect(bad, ec);
    BOOST_TEST(ec == ar::errc::bad_endpoint);
    BOOST_TEST(!conn.is_open());
    BOOST_TEST(a.is_open());
    bad = b.endpoint();
    bad.link_layer = bad.link_layer == 2 ? 1 : 2; // another link layer
    bad.lid = 1;
    bad.gid[0] = 0xfe;
    conn = a.connect(bad, ec);
    BOOST_TEST(ec == ar::errc::endpoint_mismatch);
    BOOST_TEST(ec.message().find("link layer") != std::string::npos);
    BOOST_TEST(a.is_open());

    // An unknown device, and an empty object.
    ar::queue_pair_location nowhere;
    nowhere.device = "no_such_device";
    ar::prepared_queue_pair none(ex, nowhere, options, ec);
    BOOST_TEST(ec == ar::errc::no_device);
    BOOST_TEST(!none.is_open());
    none.connect(b.endpoint(), ec);
    BOOST_TEST(ec == asio::error::bad_descriptor);
    ar::queue_pair_location no_port = location();
    no_port.port = 9;
    ar::prepared_queue_pair bad_port(ex, no_port, options, ec);
    BOOST_TEST(ec == asio::error::invalid_argument);

    // After all that, the real endpoints still connect and carry a message.
    const auto a_endpoint = a.endpoint();
    auto ca = a.connect(ar::queue_pair_endpoint::from_bytes(good));
    auto cb = b.connect(a_endpoint);
    co_await ca.async_send(asio::buffer("ok", 2), use_awaitable);
    std::array<char, 8> in{};
    auto n = co_await cb.async_receive(asio::buffer(in), use_awaitable);
    BOOST_TEST(std::string(in.data(), n) == "ok");
    ca.close();
    cb.close();
  });
}
