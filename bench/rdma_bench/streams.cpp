// rdma_bench --op stream (streams.hpp).
#include "streams.hpp"

#include "measurement.hpp"
#include "results.hpp"
#include "sweep.hpp"

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <infiniband/verbs.h>

#include <array>
#include <iostream>
#include <stdexcept>
#include <vector>

namespace rdma_bench::streams {

namespace asio = boost::asio;
using asio::awaitable;
using clock = measurement::clock;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

/// The stream's connection: small buffers (its data goes through the rings), completing
/// as the test asks.
asio_rdma::connection_options options_for(const test_parameters& t) {
  auto o = asio_rdma::stream_connection_options();
  o.max_inline_data = t.inline_size;
  o.timeout = std::chrono::seconds(30);
  apply_completion(t, o);
  return o;
}

/// The graceful close: reads until the peer's end of data (it shut down after this side
/// did), so that the peer's shutdown completes before this side closes.
awaitable<void> until_end(asio_rdma::stream& stream) {
  std::array<std::byte, 64> rest{};
  for (;;) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(rest), tuple_awaitable);
    if (ec == asio::error::eof)
      co_return;
    if (ec)
      throw boost::system::system_error(ec, "stream: waiting for the server's end");
    if (n)
      throw std::runtime_error("stream: the server sent more than it should");
  }
}

awaitable<result> run_size(const settings& s, std::size_t size, std::string& device) {
  auto ex = co_await asio::this_coro::executor;
  const test_parameters t = parameters_for(s, size);
  auto options = options_for(t);
  options.timeout = s.connect_timeout;
  options.keepalive_interval = s.keepalive_interval;
  auto encoded = encode(t);
  options.private_data.assign(encoded.begin(), encoded.end());
  auto conn = co_await asio_rdma::async_connect(ex, s.host, s.port, options, asio::use_awaitable);
  auto* qp = conn.native_queue_pair();
  device = qp ? ::ibv_get_device_name(qp->context->device) : "?";
  asio_rdma::stream_options so;
  using mode = settings::stream_transfer_mode;
  so.transfer = s.stream_transfer == mode::push     ? asio_rdma::stream_transfer::push
                : s.stream_transfer == mode::shared ? asio_rdma::stream_transfer::shared
                                                    : asio_rdma::stream_transfer::automatic;
  asio_rdma::stream stream(std::move(conn), so);

  std::vector<std::byte> buffer(size, std::byte{0x5a});
  measurement m(s, size);
  m.begin();
  if (s.mode == test_mode::bandwidth) {
    std::uint64_t written = 0;
    while (!m.done()) {
      co_await asio::async_write(stream, asio::buffer(buffer), asio::use_awaitable);
      written += size;
      m.completed(1, clock::now());
    }
    co_await stream.async_shutdown(asio::use_awaitable);
    std::array<std::byte, 8> count{};
    co_await asio::async_read(stream, asio::buffer(count), asio::use_awaitable);
    const std::uint64_t read = wire::get(count.data(), 8);
    if (read != written)
      throw std::runtime_error("stream: the server read " + std::to_string(read) + " bytes of " +
                               std::to_string(written) + " written");
    co_await until_end(stream);
  } else {
    while (!m.done()) {
      const auto start = clock::now();
      co_await asio::async_write(stream, asio::buffer(buffer), asio::use_awaitable);
      co_await asio::async_read(stream, asio::buffer(buffer), asio::use_awaitable);
      const auto end = clock::now();
      m.sample(std::chrono::duration<double, std::micro>(end - start).count() / 2);
      m.completed(1, end);
    }
    co_await stream.async_shutdown(asio::use_awaitable);
    co_await until_end(stream);
  }
  co_return m.take();
}

} // namespace

awaitable<void> serve(asio_rdma::connection_request request, test_parameters t) {
  auto conn = co_await request.async_accept(options_for(t), asio::use_awaitable);
  asio_rdma::stream stream(std::move(conn));
  std::vector<std::byte> buffer(std::max<std::size_t>(t.size, 64 * 1024));
  if (t.mode == test_mode::bandwidth) {
    std::uint64_t total = 0;
    for (;;) {
      auto [ec, n] = co_await stream.async_read_some(asio::buffer(buffer), tuple_awaitable);
      total += n;
      if (ec == asio::error::eof)
        break;
      if (ec) {
        std::cerr << "rdma_bench: stream session ended: " << ec.message() << std::endl;
        co_return;
      }
    }
    std::array<std::byte, 8> count{};
    wire::put(count.data(), total, 8);
    co_await asio::async_write(stream, asio::buffer(count), asio::use_awaitable);
  } else {
    auto message = asio::buffer(buffer.data(), t.size);
    for (;;) {
      auto [ec, n] = co_await asio::async_read(stream, message, tuple_awaitable);
      if (ec)
        break; // eof: the client is done
      auto [wec, wn] = co_await asio::async_write(stream, message, tuple_awaitable);
      if (wec)
        co_return;
    }
  }
  // This side's end after the client's: the client reads it, then closes.
  co_await stream.async_shutdown(tuple_awaitable);
}

awaitable<int> run_client(const settings& s) {
  return run_sweep(s, run_size);
}

} // namespace rdma_bench::streams
