// A 64-byte (or any size) ping-pong over rsocket, rdma-core's sockets over RDMA, or over
// TCP, that reports the distribution of the one-way latency as rdma_bench does (p50,
// mean, p99 of half of each round trip), where rstream prints only a mean. It lets
// bench/compare_stream compare asio_rdma::stream's median with rsocket's median, and
// show whether rsocket's run has the VM's tail that every busy poller here has.
//
//   rsocket_lat server ADDR PORT [--tcp]
//   rsocket_lat client ADDR PORT [--tcp] [--size N] [--iterations N] [--warmup N]
//
// The server answers one client: it echoes every message of --size bytes back until the
// client closes. The client prints one line:
//   p50_us P mean_us M p99_us Q iterations N
// Both ends run as rstream does by default: non-blocking sockets (O_NONBLOCK), calls
// with MSG_DONTWAIT repeated until they move bytes (a busy loop, never waiting for an
// event), TCP_NODELAY, 512 KiB socket buffers. The mean of its samples is then what
// rstream -S SIZE -C 1 -I N reports as usec/xfer, measured alike.
#include "results.hpp" // rdma_bench's latency result: the same quantiles and mean

#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <rdma/rsocket.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

/// The socket calls of one transport: rsocket's or the kernel's (the same signatures).
struct socket_api {
  int (*socket)(int, int, int);
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*connect)(int, const sockaddr*, socklen_t);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*fcntl)(int, int, ...);
  int (*close)(int);
};

const socket_api rsocket_calls{::rsocket, ::rbind,       ::rlisten, ::raccept, ::rconnect,
                               ::rsend,   ::rrecv,       ::rsetsockopt, ::rfcntl, ::rclose};
const socket_api tcp_calls{::socket, ::bind,       ::listen, ::accept, ::connect,
                           ::send,   ::recv,       ::setsockopt, ::fcntl, ::close};

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

sockaddr_in address_of(const std::string& addr, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    throw std::runtime_error("not an IPv4 address: " + addr);
  return sa;
}

/// Moves all of `n` bytes with `step` (a send or a receive, never waiting), spinning while
/// it would block; false when the peer closed (a receive of 0).
template <typename Step> bool move_all(Step step, char* p, std::size_t n, const char* what) {
  while (n > 0) {
    const ssize_t r = step(p, n);
    if (r == 0)
      return false;
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        continue;
      fail(what);
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
bool send_all(const socket_api& api, int fd, char* p, std::size_t n) {
  return move_all([&](char* at, std::size_t left) { return api.send(fd, at, left, MSG_DONTWAIT); },
                  p, n, "send");
}
bool receive_all(const socket_api& api, int fd, char* p, std::size_t n) {
  return move_all([&](char* at, std::size_t left) { return api.recv(fd, at, left, MSG_DONTWAIT); },
                  p, n, "recv");
}

/// rstream's options (set_options in rdma-core's librdmacm/examples/rstream.c): on the
/// listener and the accepted socket, and before connecting (rsocket sizes its buffers
/// when it connects).
void as_rstream_does(const socket_api& api, int fd) {
  const int on = 1, buffer = 1 << 19;
  api.setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  api.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  api.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}
/// Then, connected: calls that never wait (rstream sets it with its options; here after
/// the connect, which then needs no polling of its own).
void non_blocking(const socket_api& api, int fd) {
  if (api.fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
    fail("fcntl O_NONBLOCK");
}

void serve(const socket_api& api, const sockaddr_in& sa, std::size_t size) {
  const int listener = api.socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0)
    fail("socket");
  const int on = 1;
  api.setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  as_rstream_does(api, listener);
  if (api.bind(listener, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0)
    fail("bind");
  if (api.listen(listener, 1) != 0)
    fail("listen");
  std::printf("listening\n");
  std::fflush(stdout);
  const int fd = api.accept(listener, nullptr, nullptr);
  if (fd < 0)
    fail("accept");
  as_rstream_does(api, fd);
  non_blocking(api, fd);
  std::vector<char> buffer(size);
  while (receive_all(api, fd, buffer.data(), size))
    send_all(api, fd, buffer.data(), size);
  api.close(fd);
  api.close(listener);
}

void measure(const socket_api& api, const sockaddr_in& sa, std::size_t size,
             std::size_t iterations, std::size_t warmup) {
  const int fd = api.socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    fail("socket");
  as_rstream_does(api, fd);
  if (api.connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0)
    fail("connect");
  non_blocking(api, fd);
  std::vector<char> buffer(size, 'x');
  rdma_bench::result r;
  r.latencies_us.reserve(iterations);
  using clock = std::chrono::steady_clock;
  for (std::size_t i = 0; i < warmup + iterations; ++i) {
    const auto start = clock::now();
    send_all(api, fd, buffer.data(), size);
    if (!receive_all(api, fd, buffer.data(), size))
      throw std::runtime_error("the server closed the connection");
    const auto end = clock::now();
    if (i >= warmup)
      r.latencies_us.push_back(
          std::chrono::duration<double, std::micro>(end - start).count() / 2);
  }
  api.close(fd);
  r.finish();
  std::printf("p50_us %.3f mean_us %.3f p99_us %.3f iterations %zu\n", r.quantile(0.5),
              r.mean(), r.quantile(0.99), r.latencies_us.size());
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app("one-way latency of a ping-pong over rsocket or TCP, as a distribution",
               "rsocket_lat");
  app.require_subcommand(1);
  std::string addr;
  std::uint16_t port = 0;
  bool tcp = false;
  std::size_t size = 64, iterations = 20000, warmup = 1000;
  for (auto* sub : {app.add_subcommand("server", "echo one client's messages"),
                    app.add_subcommand("client", "measure against a server")}) {
    sub->add_option("address", addr, "IPv4 address (server: to listen on)")->required();
    sub->add_option("port", port, "port")->required()->check(CLI::Range(1, 65535));
    sub->add_flag("--tcp", tcp, "the kernel's TCP instead of rsocket");
    sub->add_option("--size", size, "message size in bytes (both ends)")
        ->check(CLI::Range(1, 1 << 20));
  }
  auto* client = app.get_subcommand("client");
  client->add_option("--iterations", iterations, "round trips measured")
      ->check(CLI::Range(1, 100000000));
  client->add_option("--warmup", warmup, "round trips before measuring")
      ->check(CLI::Range(0, 100000000));
  // Misuse reported as every program of the project does (cli.hpp): exit status 2.
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  try {
    const socket_api& api = tcp ? tcp_calls : rsocket_calls;
    const auto sa = address_of(addr, port);
    if (app.got_subcommand("server"))
      serve(api, sa, size);
    else
      measure(api, sa, size, iterations, warmup);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rsocket_lat: %s\n", e.what());
    return 1;
  }
  return 0;
}
