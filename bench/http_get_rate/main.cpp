// Boost.Beast HTTP GETs per second over asio_rdma::stream or over TCP: the client half of
// bench/compare_stream's HTTP figure. The server is examples/http_file_server, whose Beast
// code serves both (RDMA on its port, TCP on the next), so the two figures differ only in
// the stream under the same HTTP code.
//
//   http_get_rate rdma|tcp ADDR PORT PATH [--seconds S] [--warmup W] [--connections C]
//
// Each of C connections sends keep-alive GETs of PATH one after another and reads each
// response whole (a status other than 200 fails the run). After W seconds of warm-up it
// counts for S seconds, then prints one line:
//   requests_per_s R p50_us L requests N connections C
// (L: the median time from a GET's write to its response read, microseconds).
#include <asio_rdma/asio_rdma.hpp>

#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using clock_type = std::chrono::steady_clock;

namespace {

struct settings {
  std::string transport, address, path;
  std::uint16_t port = 0;
  double seconds = 2, warmup = 0.5;
  int connections = 1;
};

/// What the connections measured, shared: they run on one thread.
struct tally {
  clock_type::time_point counting_from, until;
  std::size_t requests = 0;
  std::vector<double> latencies_us;
};

/// GETs on one connection of either kind until the measurement ends.
template <typename Stream>
awaitable<void> get_repeatedly(Stream& stream, const std::string& target, tally& t) {
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "asio-rdma-bench");
  req.keep_alive(true);
  beast::flat_buffer buffer;
  for (;;) {
    const auto sent = clock_type::now();
    if (sent >= t.until)
      co_return;
    co_await http::async_write(stream, req, use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(stream, buffer, res, use_awaitable);
    if (res.result() != http::status::ok)
      throw std::runtime_error("GET " + target + ": " + std::to_string(res.result_int()) + " " +
                               std::string(res.reason()));
    const auto done = clock_type::now();
    if (sent >= t.counting_from && done <= t.until) {
      ++t.requests;
      t.latencies_us.push_back(std::chrono::duration<double, std::micro>(done - sent).count());
    }
  }
}

awaitable<void> one_connection(const settings& s, tally& t) {
  auto ex = co_await asio::this_coro::executor;
  if (s.transport == "rdma") {
    auto stream = co_await asio_rdma::async_connect_stream(ex, s.address, s.port, use_awaitable);
    co_await get_repeatedly(stream, s.path, t);
  } else {
    asio::ip::tcp::socket socket(ex);
    const asio::ip::tcp::endpoint server(asio::ip::make_address(s.address), s.port);
    co_await socket.async_connect(server, use_awaitable);
    socket.set_option(asio::ip::tcp::no_delay(true)); // as a latency-minded HTTP client does
    co_await get_repeatedly(socket, s.path, t);
  }
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app("Boost.Beast HTTP GETs per second over asio_rdma::stream or TCP", "http_get_rate");
  app.add_option("transport", s.transport, "rdma or tcp")
      ->required()
      ->check(CLI::IsMember({"rdma", "tcp"}));
  app.add_option("address", s.address, "the server's address")->required();
  app.add_option("port", s.port, "its port (http_file_server: RDMA on PORT, TCP on PORT + 1)")
      ->required();
  app.add_option("path", s.path, "the path to GET, e.g. /file")->required();
  app.add_option("--seconds", s.seconds, "how long to count")->check(CLI::PositiveNumber);
  app.add_option("--warmup", s.warmup, "how long to run before counting")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--connections", s.connections, "connections, each one GET at a time")
      ->check(CLI::Range(1, 256));
  // Misuse reported as every program of the project does (cli.hpp): exit status 2.
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;

  asio::io_context io;
  tally t;
  t.latencies_us.reserve(1 << 20);
  int running = s.connections, status = 0;
  for (int i = 0; i < s.connections; ++i)
    asio::co_spawn(io, one_connection(s, t), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          std::cerr << "http_get_rate: " << x.what() << std::endl;
        }
        status = 1;
        io.stop();
      }
      --running;
    });
  // The clock starts once every connection is being set up: connecting is not measured.
  const auto start = clock_type::now();
  t.counting_from = start + std::chrono::duration_cast<clock_type::duration>(
                                std::chrono::duration<double>(s.warmup));
  t.until = t.counting_from + std::chrono::duration_cast<clock_type::duration>(
                                  std::chrono::duration<double>(s.seconds));
  io.run();
  if (status != 0)
    return status;
  if (t.requests == 0) {
    std::cerr << "http_get_rate: no GET completed within the measured time" << std::endl;
    return 1;
  }
  auto middle = t.latencies_us.begin() + std::ptrdiff_t(t.latencies_us.size() / 2);
  std::nth_element(t.latencies_us.begin(), middle, t.latencies_us.end());
  std::printf("requests_per_s %.1f p50_us %.1f requests %zu connections %d\n",
              double(t.requests) / s.seconds, *middle, t.requests, s.connections);
  return 0;
}
