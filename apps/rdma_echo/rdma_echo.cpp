// rdma_echo: an echo server and a verifying client on asio-rdma.
//
//   rdma_echo server [--bind ADDR] [--port 7471] [--max-size BYTES]
//   rdma_echo client HOST [--port 7471] [--count N] [--size BYTES] [--depth D]
//
// The server echoes every message back to its sender, for any number of
// clients at once. The client keeps D messages in flight, checks every echoed
// byte and prints a summary; any error or mismatch exits non-zero.
#include <asio_rdma/asio_rdma.hpp>

#include "cli.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

namespace {

struct settings {
  std::string mode;
  std::string host = "0.0.0.0";
  std::uint16_t port = 7471;
  std::uint64_t count = 1000;
  std::size_t size = 4096;
  unsigned depth = 8;
  std::size_t max_size = 64 * 1024;
};

/// The command line: `server` and `client` subcommands (CLI11).
void describe(CLI::App& app, settings& s) {
  using asio_rdma::cli::add_number;
  app.description("An echo server and a verifying client on asio-rdma");
  app.require_subcommand(1);
  auto* server = app.add_subcommand("server", "echo every message back to its sender");
  auto* client = app.add_subcommand("client", "send messages, check every echoed byte");
  server->callback([&s] { s.mode = "server"; });
  client->callback([&s] { s.mode = "client"; });
  for (auto* sub : {server, client})
    add_number(*sub, "--port", s.port, 1, 65535, "port (default 7471)");
  server->add_option("--bind", s.host, "address to listen on (default 0.0.0.0)");
  add_number(*server, "--max-size", s.max_size, 1, 1 << 30,
             "largest message (k/m/g suffixes; default 64k)", true);
  client->add_option("HOST", s.host, "the server's address")->required();
  add_number(*client, "--count", s.count, 1, 1ull << 40, "messages to send (default 1000)");
  add_number(*client, "--size", s.size, 0, 1 << 30, "message size (default 4096)", true);
  add_number(*client, "--depth", s.depth, 1, 4096, "messages in flight (default 8)");
}

// ---------------------------------------------------------------- server

awaitable<void> echo_session(asio_rdma::connection conn) {
  auto peer = conn.remote_endpoint();
  std::vector<std::byte> buffer(conn.options().max_message_size);
  std::uint64_t messages = 0;
  try {
    for (;;) {
      auto [ec, n] =
          co_await conn.async_receive(asio::buffer(buffer), asio::as_tuple(use_awaitable));
      if (ec == asio::error::eof)
        break;
      if (ec)
        throw boost::system::system_error(ec);
      co_await conn.async_send(asio::buffer(buffer.data(), n), use_awaitable);
      ++messages;
    }
    std::cout << "rdma_echo: " << peer << " disconnected after " << messages << " messages"
              << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "rdma_echo: session with " << peer << " failed: " << e.what() << std::endl;
  }
}

awaitable<void> serve(const settings& s) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::acceptor_options options;
  options.connection.max_message_size = s.max_size;
  asio_rdma::acceptor acceptor(ex, s.host, s.port, options);
  std::cout << "rdma_echo: listening on " << acceptor.local_endpoint() << std::endl;
  for (;;) {
    auto [ec, conn] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
    if (ec == asio::error::operation_aborted)
      co_return;
    if (ec) { // one failed handshake does not stop the server
      std::cerr << "rdma_echo: accept failed: " << ec.message() << std::endl;
      continue;
    }
    asio::co_spawn(ex, echo_session(std::move(conn)), asio::detached);
  }
}

// ---------------------------------------------------------------- client

std::byte pattern(std::uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7 + 1) & 0xff);
}

struct client_state {
  asio_rdma::connection conn;
  settings s;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t mismatches = 0;
};

awaitable<void> client_worker(client_state& st) {
  std::vector<std::byte> out(st.s.size), in(st.s.size);
  while (st.sent < st.s.count) {
    // Sequence numbers are taken in the order the sends are initiated, and RC
    // delivers in order, so the k-th completed receive holds message k.
    std::uint64_t seq = st.sent++;
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = pattern(seq, i);
    co_await st.conn.async_send(asio::buffer(out), use_awaitable);
    std::size_t n = co_await st.conn.async_receive(asio::buffer(in), use_awaitable);
    std::uint64_t k = st.received++;
    bool ok = n == st.s.size;
    for (std::size_t i = 0; ok && i < n; ++i)
      ok = in[i] == pattern(k, i);
    if (!ok && st.mismatches++ == 0)
      std::cerr << "rdma_echo: echo " << k << " differs from what was sent (" << n << " bytes)"
                << std::endl;
  }
}

awaitable<int> run_client(settings s) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::connection_options options;
  options.max_message_size = std::max<std::size_t>(s.size, 1);
  options.timeout = std::chrono::seconds(10);
  // (Not inside the braces of st's initialiser: GCC 12 miscompiles co_await
  // within aggregate initialisation.)
  auto conn = co_await asio_rdma::async_connect(ex, s.host, s.port, options, use_awaitable);
  client_state st{std::move(conn), s};
  auto start = std::chrono::steady_clock::now();
  unsigned workers = static_cast<unsigned>(std::min<std::uint64_t>(s.depth, s.count));
  auto remaining = std::make_shared<unsigned>(workers);
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  std::exception_ptr failure;
  for (unsigned w = 0; w < workers; ++w)
    asio::co_spawn(ex, client_worker(st), [&, remaining](std::exception_ptr e) {
      if (e && !failure)
        failure = e;
      if (--*remaining == 0)
        done.cancel();
    });
  co_await done.async_wait(asio::as_tuple(use_awaitable));
  if (failure)
    std::rethrow_exception(failure);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  co_await st.conn.async_disconnect(asio::as_tuple(use_awaitable));
  std::printf("rdma_echo: %llu messages of %zu bytes echoed, %llu verified, %llu mismatched "
              "in %.3f s (%.0f msg/s, %.2f Mb/s), depth %u\n",
              static_cast<unsigned long long>(st.received), s.size,
              static_cast<unsigned long long>(st.received - st.mismatches),
              static_cast<unsigned long long>(st.mismatches), seconds, st.received / seconds,
              st.received * s.size * 8 / seconds / 1e6, s.depth);
  co_return st.mismatches == 0 && st.received == s.count ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app("", "rdma_echo");
  describe(app, s);
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  asio::io_context io;
  int status = 0;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) { io.stop(); });
  auto report = [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "rdma_echo: " << ex.what() << std::endl;
      }
      status = 1;
    }
    signals.cancel();
  };
  if (s.mode == "server")
    asio::co_spawn(io, serve(s), report);
  else
    asio::co_spawn(io, run_client(s), [&](std::exception_ptr e, int rc) {
      report(e);
      if (!e)
        status = rc;
    });
  io.run();
  return status;
}
