// ud_latency: datagram ping-pong latency of asio_rdma::datagram_socket, to
// compare with `ib_send_lat -c UD` in the same boot (both report half the
// round trip, as perftest does).
//
//   ud_latency server ADDR PORT
//   ud_latency client ADDR PORT [--size 64] [--iterations 2000] [--warmup 100]
//   (both: [--completion event|busy_poll])
#include <asio_rdma/datagram_socket.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

namespace {

awaitable<void> serve(asio_rdma::datagram_socket& sock) {
  std::vector<std::byte> buf(sock.max_message_size());
  std::printf("ud_latency: listening on port %u (max datagram %zu)\n", sock.local_port(),
              sock.max_message_size());
  std::fflush(stdout);
  for (;;) {
    auto [n, sender] = co_await sock.async_receive_from(asio::buffer(buf), use_awaitable);
    co_await sock.async_send_to(asio::buffer(buf.data(), n), sender, use_awaitable);
  }
}

awaitable<void> client(asio_rdma::datagram_socket& sock, std::string host, std::uint16_t port,
                       std::size_t size, int iterations, int warmup) {
  auto peer = co_await sock.async_resolve(host, port, use_awaitable);
  std::vector<std::byte> out(size, std::byte{0x5a}), in(sock.max_message_size());
  std::vector<double> half_rtt_us;
  half_rtt_us.reserve(iterations);
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    co_await sock.async_send_to(asio::buffer(out), peer, use_awaitable);
    co_await sock.async_receive_from(asio::buffer(in), use_awaitable);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup)
      half_rtt_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
  }
  std::sort(half_rtt_us.begin(), half_rtt_us.end());
  auto q = [&](double p) {
    return half_rtt_us[std::min(half_rtt_us.size() - 1,
                                static_cast<std::size_t>(p * half_rtt_us.size()))];
  };
  std::printf("ud_latency: bytes %zu iterations %d t_min %.2f t_p50 %.2f t_p99 %.2f t_max %.2f "
              "us (half round trip)\n",
              size, iterations, q(0), q(0.5), q(0.99), half_rtt_us.back());
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: ud_latency server|client ADDR PORT [--size N] [--iterations N] "
                         "[--warmup N]\n");
    return 2;
  }
  const std::string role = argv[1], addr = argv[2];
  const auto port = static_cast<std::uint16_t>(std::atoi(argv[3]));
  std::size_t size = 64;
  int iterations = 2000, warmup = 100;
  asio_rdma::datagram_options options;
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--size")
      size = std::strtoul(argv[i + 1], nullptr, 10);
    else if (opt == "--iterations")
      iterations = std::atoi(argv[i + 1]);
    else if (opt == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else if (opt == "--completion") {
      const std::string mode = argv[i + 1];
      if (mode == "event")
        options.completion_mode = asio_rdma::completion_mode::event;
      else if (mode == "busy_poll")
        options.completion_mode = asio_rdma::completion_mode::busy_poll;
      else {
        std::fprintf(stderr, "ud_latency: --completion event|busy_poll\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "ud_latency: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (iterations < 1 || warmup < 0) {
    std::fprintf(stderr, "ud_latency: iterations must be >= 1\n");
    return 2;
  }
  try {
    asio::io_context io(1);
    asio_rdma::datagram_socket sock(io.get_executor(), addr, role == "server" ? port : 0, options);
    int status = 0;
    auto done = [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          std::fprintf(stderr, "ud_latency: %s\n", x.what());
        }
        status = 1;
      }
      io.stop();
    };
    if (role == "server")
      asio::co_spawn(io, serve(sock), done);
    else
      asio::co_spawn(io, client(sock, addr, port, size, iterations, warmup), done);
    io.run();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ud_latency: %s\n", e.what());
    return 1;
  }
}
