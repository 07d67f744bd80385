// rpc_echo: asio_rdma::rpc echo calls to an endpoint (rdma://host:port or tcp://host:port),
// the counterpart of bench/grpc_echo with the same command line and output, measured
// against it, UCX and the send ping-pong by bench/compare_rpc.
//
//   rpc_echo [--busy-poll] server URL                      serves "echo" (returns its request)
//                                                         until killed
//   rpc_echo [--busy-poll] client URL lat SIZE SECONDS     one call at a time; half the round
//                                                         trip (us)
//   rpc_echo [--busy-poll] client URL bw SIZE DEPTH SECONDS  DEPTH calls in flight; calls per
//                                                         second
//
// --busy-poll: over RDMA, the connection polls its completion queue while a call is pending
// (completion_mode::busy_poll) instead of waiting for completion events: what ucx_perftest
// and perftest do, so that compare_rpc can set like against like. Both ends need it.
//
// Prints one line: "rpc_echo lat size=8 calls=N p50_us=X p99_us=Y" or
// "rpc_echo bw size=64 depth=32 calls=N calls_per_s=X". The first quarter second of a run
// is a warm-up that is not counted. Replies are read into each caller's own buffer (the
// client's call path allocates nothing) and their size is checked.
#include <asio_rdma/rpc.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace rpc = asio_rdma::rpc;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto warm_up = std::chrono::milliseconds(250);

asio::awaitable<std::vector<std::byte>> echo(std::span<const std::byte> request,
                                             rpc::call_context&) {
  co_return std::vector<std::byte>(request.begin(), request.end());
}

void check(std::size_t got, std::size_t size) {
  if (got != size)
    throw std::runtime_error("reply of " + std::to_string(got) + " bytes to a request of " +
                             std::to_string(size));
}

asio::awaitable<void> latency(rpc::client& c, std::size_t size, std::chrono::seconds duration) {
  std::vector<std::byte> request(size, std::byte{0x5a}), reply(size);
  std::vector<double> one_way_us;
  one_way_us.reserve(1 << 20);
  const auto start = clock_type::now(), end = start + duration;
  for (auto now = start; now < end;) {
    const auto t0 = now;
    check(co_await c.async_call("echo", asio::buffer(request), asio::buffer(reply),
                                asio::use_awaitable),
          size);
    now = clock_type::now();
    if (t0 - start >= warm_up)
      one_way_us.push_back(std::chrono::duration<double, std::micro>(now - t0).count() / 2);
  }
  if (one_way_us.empty())
    throw std::runtime_error("no call completed after the warm-up");
  auto at = [&](double q) {
    auto it = one_way_us.begin() + static_cast<std::ptrdiff_t>(q * (one_way_us.size() - 1));
    std::nth_element(one_way_us.begin(), it, one_way_us.end());
    return *it;
  };
  const double p50 = at(0.5), p99 = at(0.99);
  std::printf("rpc_echo lat size=%zu calls=%zu p50_us=%.2f p99_us=%.2f\n", size,
              one_way_us.size(), p50, p99);
}

asio::awaitable<void> rate(rpc::client& c, std::size_t size, int depth,
                           std::chrono::seconds duration) {
  const auto start = clock_type::now(), counted_from = start + warm_up, end = start + duration;
  std::size_t counted = 0;
  int running = depth;
  std::exception_ptr failure;
  auto caller = [&]() -> asio::awaitable<void> {
    std::vector<std::byte> request(size, std::byte{0x5a}), reply(size);
    while (clock_type::now() < end) {
      check(co_await c.async_call("echo", asio::buffer(request), asio::buffer(reply),
                                  asio::use_awaitable),
            size);
      const auto now = clock_type::now();
      counted += now >= counted_from && now < end;
    }
  };
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < depth; ++i)
    asio::co_spawn(ex, caller(), [&](std::exception_ptr e) {
      if (e && !failure)
        failure = e;
      --running;
    });
  asio::steady_timer t(ex);
  while (running > 0) {
    t.expires_after(std::chrono::milliseconds(1));
    co_await t.async_wait(asio::use_awaitable);
  }
  if (failure)
    std::rethrow_exception(failure);
  const double seconds = std::chrono::duration<double>(end - counted_from).count();
  std::printf("rpc_echo bw size=%zu depth=%d calls=%zu calls_per_s=%.0f\n", size, depth, counted,
              counted / seconds);
}

int usage() {
  std::fprintf(stderr, "usage: rpc_echo [--busy-poll] server URL\n"
                       "       rpc_echo [--busy-poll] client URL lat SIZE SECONDS\n"
                       "       rpc_echo [--busy-poll] client URL bw SIZE DEPTH SECONDS\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool busy_poll = !args.empty() && args[0] == "--busy-poll";
  if (busy_poll)
    args.erase(args.begin());
  const auto completion =
      busy_poll ? asio_rdma::completion_mode::busy_poll : asio_rdma::completion_mode::event;
  try {
    asio::io_context io;
    if (args.size() == 2 && args[0] == "server") {
      rpc::server_options options;
      options.rdma_connection.completion_mode = completion;
      rpc::server s(io.get_executor(), options);
      s.add_method("echo", echo);
      const auto port = s.listen(args[1]);
      std::printf("rpc_echo: listening on %s (port %u)\n", args[1].c_str(), unsigned(port));
      std::fflush(stdout);
      io.run();
      return 0;
    }
    const bool lat = args.size() == 5 && args[0] == "client" && args[2] == "lat";
    const bool bw = args.size() == 6 && args[0] == "client" && args[2] == "bw";
    if (!lat && !bw)
      return usage();
    rpc::client_options options;
    options.rdma_connection.completion_mode = completion;
    rpc::client c(io.get_executor(), args[1], options);
    const std::size_t size = std::stoul(args[3]);
    const std::chrono::seconds duration(std::stoi(args.back()));
    int status = 0;
    asio::co_spawn(io,
                   lat ? latency(c, size, duration) : rate(c, size, std::stoi(args[4]), duration),
                   [&](std::exception_ptr e) {
                     c.close(); // its connection's read would keep io.run() going
                     if (!e)
                       return;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& x) {
                       std::fprintf(stderr, "rpc_echo: %s\n", x.what());
                       status = 1;
                     }
                   });
    io.run();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rpc_echo: %s\n", e.what());
    return 1;
  }
}
