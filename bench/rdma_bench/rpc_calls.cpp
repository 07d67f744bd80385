// rdma_bench --op rpc (rpc_calls.hpp).
#include "rpc_calls.hpp"

#include "measurement.hpp"
#include "results.hpp"
#include "sweep.hpp"

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace rdma_bench::rpc_calls {

namespace asio = boost::asio;
namespace rpc = asio_rdma::rpc;
using asio::awaitable;
using clock = measurement::clock;

namespace {

/// RDMA_BENCH_RPC_BULK_THRESHOLD, if set: the client's and server's bulk_threshold (0:
/// every payload through the stream), to compare the two paths in one boot.
std::optional<std::size_t> bulk_threshold_from_environment() {
  if (const char* v = std::getenv("RDMA_BENCH_RPC_BULK_THRESHOLD"))
    return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
  return std::nullopt;
}

rpc::client_options client_options() {
  rpc::client_options o;
  if (auto t = bulk_threshold_from_environment())
    o.bulk_threshold = *t;
  return o;
}

rpc::server_options server_options() {
  rpc::server_options o;
  if (auto t = bulk_threshold_from_environment())
    o.bulk_threshold = *t;
  return o;
}

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

asio_rdma::connection_options options_for(const test_parameters& t) {
  auto o = asio_rdma::stream_connection_options();
  o.max_inline_data = t.inline_size;
  o.timeout = std::chrono::seconds(30);
  apply_completion(t, o);
  return o;
}

awaitable<void> caller(rpc::client& c, measurement& m, std::size_t size, const settings& s,
                       bool& failed, std::string& why) {
  rpc::call_options options;
  options.expose_reply_buffer = s.rpc_bulk_handles || s.rpc_registered;
  const char* method = s.rpc_bulk_handles ? "echo_bulk" : "echo";
  // Replies into a buffer of the caller's, reused as perftest reuses its buffers: the
  // call path then allocates nothing. Request and reply side by side, so that one
  // registration serves both (--rpc-registered).
  std::vector<std::byte> memory(2 * std::max<std::size_t>(size, 1), std::byte{0x5a});
  const std::span<std::byte> request(memory.data(), size), reply(memory.data() + size, size);
  asio_rdma::memory_region region;
  if (s.rpc_registered) {
    // Registration needs the connection up (the hellos exchanged).
    auto [ec] = co_await c.async_connect(tuple_awaitable);
    if (!ec)
      region = c.register_memory(memory,
                                 asio_rdma::access::remote_read |
                                     asio_rdma::access::local_write |
                                     asio_rdma::access::remote_write,
                                 ec);
    if (ec) {
      failed = true;
      why = "register_memory: " + ec.message();
      co_return;
    }
    options.request_memory = options.reply_memory = &region;
  }
  while (!m.done() && !failed) {
    const auto start = clock::now();
    auto [ec, n] = co_await c.async_call(method, asio::buffer(request), asio::buffer(reply),
                                         options, tuple_awaitable);
    const auto end = clock::now();
    if (ec || n != size) {
      failed = true;
      why = ec ? ec.message() : "a reply of " + std::to_string(n) + " bytes";
      co_return;
    }
    m.sample(std::chrono::duration<double, std::micro>(end - start).count());
    m.completed(1, end);
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
  rpc::client client(asio_rdma::stream(std::move(conn)), client_options());

  measurement m(s, size);
  m.begin();
  bool failed = false;
  std::string why;
  const std::uint32_t callers = s.mode == test_mode::latency ? 1 : s.depth;
  std::uint32_t running = callers;
  asio::steady_timer all_done(ex, clock::time_point::max());
  for (std::uint32_t i = 0; i < callers; ++i)
    asio::co_spawn(ex, caller(client, m, size, s, failed, why),
                   [&](std::exception_ptr) {
      if (--running == 0)
        all_done.cancel();
    });
  co_await all_done.async_wait(tuple_awaitable);
  if (failed)
    throw std::runtime_error("rpc: a call failed: " + why);
  result r = m.take();
  if (s.mode == test_mode::latency)
    for (auto& us : r.latencies_us)
      us /= 2; // one way, as the ping-pongs report
  co_return r;
}

} // namespace

awaitable<void> serve(asio_rdma::connection_request request, test_parameters t) {
  auto conn = co_await request.async_accept(options_for(t), asio::use_awaitable);
  // Not `server(co_await ...)`: GCC 12 destroys the default options argument of a call
  // with a co_await in it twice.
  const auto ex = co_await asio::this_coro::executor;
  rpc::server server(ex, server_options());
  server.add_method("echo", [](std::span<const std::byte> r, rpc::call_context&)
                                -> awaitable<std::vector<std::byte>> {
    co_return std::vector<std::byte>(r.begin(), r.end());
  });
  // The same echo through bulk handles: the request (read into the server's registered
  // buffer) is written back through reply_bulk(), straight into the caller's exposed
  // buffer over RDMA: no reply vector, no copy.
  server.add_method("echo_bulk", [](std::span<const std::byte> r, rpc::call_context& ctx)
                                     -> awaitable<std::vector<std::byte>> {
    co_await ctx.reply_bulk().async_write(0, asio::buffer(r), asio::use_awaitable);
    co_return std::vector<std::byte>();
  });
  server.serve(asio_rdma::stream(std::move(conn)));
  // Until the client has gone.
  asio::steady_timer poll(ex);
  while (server.connections() != 0) {
    poll.expires_after(std::chrono::milliseconds(100));
    co_await poll.async_wait(tuple_awaitable);
  }
}

awaitable<int> run_client(const settings& s) { return run_sweep(s, run_size); }

} // namespace rdma_bench::rpc_calls
