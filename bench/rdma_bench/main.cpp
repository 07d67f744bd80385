// rdma_bench: RDMA throughput and latency, on asio_rdma or on raw verbs.
//
//   rdma_bench server [--bind ADDR] [--port 7472] [--raw-verbs]
//   rdma_bench client HOST [--op OP] [--mode bw|lat] [--sizes ...] [...]
//
// See docs/rdma_bench.md.
#include "datagrams.hpp"
#include "framework.hpp"
#include "options.hpp"
#include "raw_verbs.hpp"
#include "rpc_calls.hpp"
#include "streams.hpp"

#include "cli.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <cstdio>
#include <iostream>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  rdma_bench::settings s;
  CLI::App app("", "rdma_bench");
  rdma_bench::describe(app, s);
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  try {
    if (s.raw_verbs)
      return s.role == "server" ? rdma_bench::raw::serve(s) : rdma_bench::raw::run_client(s);
  } catch (const std::exception& e) {
    std::cerr << "rdma_bench: " << e.what() << std::endl;
    return 1;
  }

  // One thread runs everything: no locking in the reactor's per-descriptor
  // state (Asio's concurrency hint; the scheduler still locks, since host
  // names are resolved on Asio's resolver thread). See README, "Latency".
  asio::io_context io(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO);
  int status = 0;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto ec, int) {
    if (!ec)
      io.stop();
  });
  auto finish = [&](std::exception_ptr e, int rc) {
    status = rc;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "rdma_bench: " << x.what() << std::endl;
      }
      status = 1;
    }
    signals.cancel();
  };
  if (s.role == "server") {
    asio::co_spawn(io, rdma_bench::framework::serve(s),
                   [&](std::exception_ptr e) { finish(e, 0); });
    // Datagram tests (ud_send) on the same port number; the connection
    // server runs on without them (e.g. --bind 0.0.0.0 names no device).
    asio::co_spawn(io, rdma_bench::datagrams::serve(s), [](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "rdma_bench: no datagram server (ud_send): " << x.what() << std::endl;
      }
    });
  } else if (s.op == rdma_bench::operation::stream) {
    asio::co_spawn(io, rdma_bench::streams::run_client(s), finish);
  } else if (s.op == rdma_bench::operation::rpc) {
    asio::co_spawn(io, rdma_bench::rpc_calls::run_client(s), finish);
  } else if (s.op == rdma_bench::operation::ud_send) {
    asio::co_spawn(io, rdma_bench::datagrams::run_client(s), finish);
  } else {
    asio::co_spawn(io, rdma_bench::framework::run_client(s), finish);
  }
  io.run();
  return status;
}
