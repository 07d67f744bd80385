// A multi-threaded server: one io_context per thread. Each thread owns an
// io_context, an acceptor on its own port (PORT + thread index) and every
// connection accepted there, so nothing is shared between threads and no
// lock is needed; clients are spread over the ports (as with SO_REUSEPORT
// sharding of TCP servers).
//
//   threaded_echo ADDR PORT THREADS
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>

#include <cstdlib>
#include <iostream>
#include <syncstream>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

awaitable<void> echo(asio_rdma::connection conn, unsigned thread) {
  // osyncstream: the threads print concurrently, and each << alone is a separate
  // write that another thread's line could split.
  std::osyncstream(std::cout) << "thread " << thread << ": connection from "
                              << conn.remote_endpoint() << std::endl;
  std::vector<std::byte> buffer(conn.options().max_message_size);
  for (;;) {
    auto [ec, n] = co_await conn.async_receive(asio::buffer(buffer), asio::as_tuple(use_awaitable));
    if (ec)
      break;
    auto [send_ec, sent] =
        co_await conn.async_send(asio::buffer(buffer.data(), n), asio::as_tuple(use_awaitable));
    if (send_ec)
      break;
  }
}

awaitable<void> serve(asio_rdma::acceptor& acceptor, unsigned thread) {
  for (;;) {
    auto conn = co_await acceptor.async_accept(use_awaitable);
    // The connection runs on the acceptor's executor: this thread's io_context.
    asio::co_spawn(acceptor.get_executor(), echo(std::move(conn), thread), asio::detached);
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: threaded_echo ADDR PORT THREADS\n";
    return 2;
  }
  const unsigned threads = static_cast<unsigned>(std::atoi(argv[3]));
  const int port = std::atoi(argv[2]);
  if (threads < 1 || threads > 64 || port < 1 || port + threads - 1 > 65535) {
    std::cerr << "threaded_echo: THREADS 1..64 and PORT 1..65535\n";
    return 2;
  }
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio_rdma::acceptor> acceptors;
  acceptors.reserve(threads); // serve() keeps a reference: no reallocation
  try {
    for (unsigned i = 0; i < threads; ++i) {
      contexts.push_back(std::make_unique<asio::io_context>(1)); // 1: run by one thread
      acceptors.emplace_back(contexts[i]->get_executor(), argv[1],
                             static_cast<std::uint16_t>(port + i));
      asio::co_spawn(*contexts[i], serve(acceptors[i], i), asio::detached);
    }
  } catch (const std::exception& e) {
    std::cerr << "threaded_echo: " << e.what() << "\n";
    return 1;
  }
  // SIGINT/SIGTERM stop every io_context.
  asio::io_context signal_context;
  asio::signal_set signals(signal_context, SIGINT, SIGTERM);
  signals.async_wait([&](auto, int) {
    for (auto& c : contexts)
      c->stop();
  });
  std::thread signal_thread([&] { signal_context.run(); });
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i)
    pool.emplace_back([&, i] { contexts[i]->run(); });
  std::cout << "threaded_echo: " << threads << " threads on ports " << port << ".."
            << port + threads - 1 << std::endl;
  for (auto& t : pool)
    t.join();
  signal_context.stop();
  signal_thread.join();
}
