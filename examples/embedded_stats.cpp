// Embedding asio-rdma into an existing Asio server.
//
// One io_context, one thread: an RDMA echo service and, beside it, the TCP
// endpoint the server already had, which now reports the echo service's
// live statistics (one line per TCP connection: `nc ADDR TCP_PORT`). The
// library runs no thread of its own, so the two share state without locks.
//
//   embedded_stats ADDR RDMA_PORT TCP_PORT
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

struct statistics {
  std::uint64_t connections = 0, active = 0, messages = 0, bytes = 0;
};

// Echoes one RDMA connection's messages until the peer disconnects.
awaitable<void> echo(asio_rdma::connection conn, statistics& stats) {
  ++stats.connections;
  ++stats.active;
  std::vector<std::byte> buffer(conn.options().max_message_size);
  for (;;) {
    auto [ec, n] = co_await conn.async_receive(asio::buffer(buffer), asio::as_tuple(use_awaitable));
    if (ec) // asio::error::eof: the peer disconnected
      break;
    ++stats.messages;
    stats.bytes += n;
    auto [send_ec, sent] =
        co_await conn.async_send(asio::buffer(buffer.data(), n), asio::as_tuple(use_awaitable));
    if (send_ec)
      break;
  }
  --stats.active;
}

awaitable<void> rdma_service(asio_rdma::acceptor& acceptor, statistics& stats) {
  for (;;) {
    auto conn = co_await acceptor.async_accept(use_awaitable);
    asio::co_spawn(acceptor.get_executor(), echo(std::move(conn), stats), asio::detached);
  }
}

// The server's existing TCP endpoint: answers every connection with a line.
awaitable<void> stats_service(asio::ip::tcp::acceptor& acceptor, const statistics& stats) {
  for (;;) {
    auto socket = co_await acceptor.async_accept(use_awaitable);
    char line[160];
    int n =
        std::snprintf(line, sizeof line, "connections %llu active %llu messages %llu bytes %llu\n",
                      (unsigned long long)stats.connections, (unsigned long long)stats.active,
                      (unsigned long long)stats.messages, (unsigned long long)stats.bytes);
    co_await asio::async_write(socket, asio::buffer(line, n), use_awaitable);
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: embedded_stats ADDR RDMA_PORT TCP_PORT\n";
    return 2;
  }
  try {
    asio::io_context io;
    statistics stats;
    asio_rdma::acceptor rdma(io.get_executor(), argv[1], std::stoi(argv[2]));
    asio::ip::tcp::acceptor tcp(
        io, {asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[3]))});
    auto stop_on_error = [&](std::exception_ptr e) {
      if (e)
        io.stop();
    };
    asio::co_spawn(io, rdma_service(rdma, stats), stop_on_error);
    asio::co_spawn(io, stats_service(tcp, stats), stop_on_error);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](auto, int) { io.stop(); });
    std::cout << "embedded_stats: RDMA echo on port " << argv[2] << ", statistics on TCP port "
              << argv[3] << std::endl;
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "embedded_stats: " << e.what() << "\n";
    return 1;
  }
}
