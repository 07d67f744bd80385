// asio_rdma::stream on a real device: bytes arrive once, in order, unchanged, whatever
// the sizes of the writes and reads; Asio's composed operations (async_read, async_write,
// async_read_until) run on it; shutdown gives the reader every byte and then eof; a
// cancelled read loses nothing; a writer that outruns its reader waits; closing ends the
// peer's reads.
#define BOOST_TEST_MODULE integration_stream
#include "rdma_test.hpp"

#include <asio_rdma/stream.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <random>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using ar::test::run;
using asio::awaitable;
using asio::use_awaitable;
using ar::error_code;

namespace {

struct stream_pair {
  ar::acceptor acceptor; // stays open with the pair
  ar::stream server;
  ar::stream client;
};

/// Two ends of one stream, made of a connected pair.
awaitable<stream_pair> make_streams(ar::connection_options options) {
  auto p = co_await ar::test::make_pair(options, options);
  co_return stream_pair{std::move(p.acceptor), ar::stream(std::move(p.server)),
                       ar::stream(std::move(p.client))};
}

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v)
    b = static_cast<std::byte>(gen());
  return v;
}

/// Writes `data` in pieces of random size (1 .. max_piece) with asio::async_write.
awaitable<void> write_in_pieces(ar::stream& s, const std::vector<std::byte>& data,
                                std::size_t max_piece, unsigned seed) {
  std::mt19937 gen(seed);
  std::size_t at = 0;
  while (at < data.size()) {
    std::size_t n = std::min<std::size_t>(data.size() - at, 1 + gen() % max_piece);
    std::size_t written = co_await asio::async_write(s, asio::buffer(data.data() + at, n),
                                                     use_awaitable);
    BOOST_REQUIRE_EQUAL(written, n);
    at += n;
  }
}

/// Reads `n` bytes with async_read_some into buffers of random size (1 .. max_piece).
awaitable<std::vector<std::byte>> read_in_pieces(ar::stream& s, std::size_t n,
                                                 std::size_t max_piece, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> got(n);
  std::size_t at = 0;
  while (at < n) {
    std::size_t want = std::min<std::size_t>(n - at, 1 + gen() % max_piece);
    std::size_t m = co_await s.async_read_some(asio::buffer(got.data() + at, want), use_awaitable);
    BOOST_REQUIRE(m > 0 && m <= want);
    at += m;
  }
  co_return got;
}

awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(use_awaitable);
}

/// Until `flag` is set (by a coroutine spawned beside this one).
awaitable<void> wait_until(const bool& flag) {
  while (!flag)
    co_await sleep_for(std::chrono::milliseconds(1));
}

} // namespace

BOOST_AUTO_TEST_CASE(bytes_arrive_once_in_order_unchanged_whatever_the_piece_sizes) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    // Small messages (4 KiB) so that a write spans many and reads cut them anywhere.
    ar::connection_options o;
    o.max_message_size = 4096;
    auto s = co_await make_streams(o);
    auto ex = co_await asio::this_coro::executor;
    for (auto [size, write_piece, read_piece] :
         {std::tuple{std::size_t(1), 1, 1}, {100000, 10000, 3000}, {3 << 20, 300000, 70000},
          {1 << 16, 17, 5000}, {1 << 17, 9000, 1}}) {
      auto data = random_bytes(size, static_cast<unsigned>(size));
      bool written = false;
      asio::co_spawn(ex, write_in_pieces(s.client, data, write_piece, 7),
                     [&](std::exception_ptr e) {
                       ar::test::report_failure(e);
                       written = true;
                     });
      auto got = co_await read_in_pieces(s.server, size, read_piece, 11);
      BOOST_TEST_REQUIRE((got == data), size << " bytes, written in pieces of up to "
                                              << write_piece << ", read in up to " << read_piece);
      // The writer's last write completes with the peer's acknowledgement.
      co_await wait_until(written);
    }
    // And the other way round, with reads that hold whole messages (no staging).
    auto data = random_bytes(1 << 20, 3);
    bool written = false;
    asio::co_spawn(ex, write_in_pieces(s.server, data, 1 << 20, 5), [&](std::exception_ptr e) {
      ar::test::report_failure(e);
      written = true;
    });
    auto got = co_await read_in_pieces(s.client, data.size(), 1 << 20, 13);
    BOOST_TEST((got == data));
    co_await wait_until(written);
  });
}

BOOST_AUTO_TEST_CASE(connect_stream_and_accept_stream_make_the_two_ends) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, ar::test::device_address(), 0);
    ar::stream server;
    bool accepted = false;
    asio::co_spawn(ex, ar::async_accept_stream(acceptor, use_awaitable),
                   [&](std::exception_ptr e, ar::stream s) {
                     ar::test::report_failure(e);
                     server = std::move(s);
                     accepted = true;
                   });
    ar::connection_options o;
    auto client = co_await ar::async_connect_stream(ex, ar::test::device_address(),
                                                    acceptor.local_endpoint().port(), o,
                                                    use_awaitable);
    co_await wait_until(accepted);
    BOOST_TEST(client.is_open());
    BOOST_TEST(server.is_open());
    BOOST_TEST(client.underlying_connection().remote_endpoint().port() == acceptor.local_endpoint().port());
    std::string hello = "hello over a stream";
    co_await asio::async_write(client, asio::buffer(hello), use_awaitable);
    std::string got(hello.size(), '\0');
    co_await asio::async_read(server, asio::buffer(got), use_awaitable);
    BOOST_TEST(got == hello);
    // A connect to a port nobody listens on fails as async_connect does.
    acceptor.close();
    auto [ec, none] = co_await ar::async_connect_stream(
        ex, ar::test::device_address(), acceptor.local_endpoint().port() + 1, o,
        asio::as_tuple(use_awaitable));
    BOOST_TEST(ec == asio::error::connection_refused, ec.message());
    BOOST_TEST(!none.is_open());
  });
}

BOOST_AUTO_TEST_CASE(read_until_runs_a_line_protocol) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto s = co_await make_streams(ar::connection_options());
    auto ex = co_await asio::this_coro::executor;
    bool written = false;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          for (std::string piece : {"GET /a", "\nGET /b\nGE", "T /c\n", "QUIT\n"})
            co_await asio::async_write(s.client, asio::buffer(piece), use_awaitable);
          written = true;
        },
        ar::test::report_failure);
    std::string buffer;
    std::vector<std::string> lines;
    while (lines.empty() || lines.back() != "QUIT") {
      std::size_t n = co_await asio::async_read_until(s.server, asio::dynamic_buffer(buffer), '\n',
                                                      use_awaitable);
      lines.push_back(buffer.substr(0, n - 1));
      buffer.erase(0, n);
    }
    BOOST_TEST((lines == std::vector<std::string>{"GET /a", "GET /b", "GET /c", "QUIT"}));
    co_await wait_until(written);
  });
}

BOOST_AUTO_TEST_CASE(shutdown_gives_every_byte_then_eof_and_ends_writing) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options o;
    o.max_message_size = 8192;
    auto s = co_await make_streams(o);
    auto data = random_bytes(100000, 1);
    co_await asio::async_write(s.client, asio::buffer(data), use_awaitable);
    co_await s.client.async_shutdown(use_awaitable);
    // Writing after the shutdown is refused; a second shutdown is harmless.
    auto [wec, wn] = co_await s.client.async_write_some(asio::buffer(data, 10),
                                                        asio::as_tuple(use_awaitable));
    BOOST_TEST(wec == asio::error::shut_down, wec.message());
    BOOST_TEST(wn == 0u);
    co_await s.client.async_shutdown(use_awaitable);
    // The reader gets all of it, then eof, and eof again.
    std::vector<std::byte> got(data.size() + 100);
    auto [ec, n] = co_await asio::async_read(s.server, asio::buffer(got),
                                             asio::as_tuple(use_awaitable));
    BOOST_TEST(ec == asio::error::eof, ec.message());
    BOOST_REQUIRE_EQUAL(n, data.size());
    got.resize(n);
    BOOST_TEST((got == data));
    auto [ec2, n2] = co_await s.server.async_read_some(asio::buffer(got),
                                                       asio::as_tuple(use_awaitable));
    BOOST_TEST(ec2 == asio::error::eof);
    BOOST_TEST(n2 == 0u);
    // The other direction still works: a half-closed stream.
    std::string reply = "still here";
    co_await asio::async_write(s.server, asio::buffer(reply), use_awaitable);
    std::string back(reply.size(), '\0');
    co_await asio::async_read(s.client, asio::buffer(back), use_awaitable);
    BOOST_TEST(back == reply);
  });
}

BOOST_AUTO_TEST_CASE(a_cancelled_read_completes_aborted_and_loses_no_byte) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options o;
    o.max_message_size = 1024;
    auto s = co_await make_streams(o);
    auto ex = co_await asio::this_coro::executor;
    for (int round = 0; round < 20; ++round) {
      // A read (staged: its buffer is smaller than a message) waits, and is cancelled.
      asio::cancellation_signal cancel;
      std::array<char, 16> small{};
      bool done = false;
      error_code read_ec;
      s.server.async_read_some(asio::buffer(small),
                               asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, std::size_t) {
                                 read_ec = ec;
                                 done = true;
                               }));
      co_await sleep_for(std::chrono::milliseconds(round % 3));
      cancel.emit(round % 2 ? asio::cancellation_type::terminal
                            : asio::cancellation_type::total);
      co_await wait_until(done);
      BOOST_TEST(read_ec == asio::error::operation_aborted, read_ec.message());
      // What is written next is read whole by the next reads.
      std::string text = "round " + std::to_string(round) + std::string(600, '.');
      bool written = false;
      asio::co_spawn(ex, asio::async_write(s.client, asio::buffer(text), use_awaitable),
                     [&](std::exception_ptr e, std::size_t) {
                       ar::test::report_failure(e);
                       written = true;
                     });
      std::string got(text.size(), '\0');
      co_await asio::async_read(s.server, asio::buffer(got), use_awaitable);
      BOOST_TEST(got == text);
      co_await wait_until(written);
    }
  });
}

BOOST_AUTO_TEST_CASE(a_writer_that_outruns_its_reader_waits_and_loses_nothing) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::connection_options o;
    o.max_message_size = 4096;
    o.receive_queue_depth = 4; // 16 KiB of receive buffers for 2 MiB of data
    auto s = co_await make_streams(o);
    auto ex = co_await asio::this_coro::executor;
    auto data = random_bytes(2 << 20, 9);
    bool written = false;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          co_await asio::async_write(s.client, asio::buffer(data), use_awaitable);
          written = true;
        },
        ar::test::report_failure);
    co_await sleep_for(std::chrono::milliseconds(500)); // the reader is away
    BOOST_TEST(!written);
    std::vector<std::byte> got(data.size());
    co_await asio::async_read(s.server, asio::buffer(got), use_awaitable);
    BOOST_TEST((got == data));
    co_await wait_until(written);
  });
}

BOOST_AUTO_TEST_CASE(closing_one_end_ends_the_other_ends_pending_read) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto s = co_await make_streams(ar::connection_options());
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          co_await sleep_for(std::chrono::milliseconds(100));
          s.client.close();
        },
        ar::test::report_failure);
    std::array<char, 100> buffer{};
    auto [ec, n] = co_await s.server.async_read_some(asio::buffer(buffer),
                                                     asio::as_tuple(use_awaitable));
    BOOST_TEST(!!ec, "the read ended with " << ec.message());
    BOOST_TEST(n == 0u);
    BOOST_TEST(!s.client.is_open());
    auto [wec, wn] = co_await s.client.async_write_some(asio::buffer(buffer),
                                                        asio::as_tuple(use_awaitable));
    BOOST_TEST(!!wec);
  });
}

BOOST_AUTO_TEST_CASE(a_stream_that_is_not_open_fails_every_operation_with_not_connected) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    ar::stream none;
    BOOST_TEST(!none.is_open());
    std::array<char, 8> b{};
    auto [rec, rn] = co_await none.async_read_some(asio::buffer(b), asio::as_tuple(use_awaitable));
    BOOST_TEST(rec == asio::error::not_connected);
    auto [wec, wn] = co_await none.async_write_some(asio::buffer(b), asio::as_tuple(use_awaitable));
    BOOST_TEST(wec == asio::error::not_connected);
    auto [sec] = co_await none.async_shutdown(asio::as_tuple(use_awaitable));
    BOOST_TEST(sec == asio::error::not_connected);
    ar::stream from_closed{ar::connection()};
    BOOST_TEST(!from_closed.is_open());
  });
}

BOOST_AUTO_TEST_CASE(a_second_read_while_one_is_pending_is_refused) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto s = co_await make_streams(ar::connection_options());
    std::array<char, 8> a{}, b{};
    bool first_done = false;
    error_code first_ec;
    s.server.async_read_some(asio::buffer(a), [&](error_code ec, std::size_t) {
      first_ec = ec;
      first_done = true;
    });
    auto [ec, n] = co_await s.server.async_read_some(asio::buffer(b), asio::as_tuple(use_awaitable));
    BOOST_TEST(ec == asio::error::already_started, ec.message());
    co_await asio::async_write(s.client, asio::buffer("x", 1), use_awaitable);
    co_await wait_until(first_done);
    BOOST_TEST(!first_ec);
    BOOST_TEST(a[0] == 'x');
  });
}
