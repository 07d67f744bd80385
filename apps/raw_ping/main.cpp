// raw_ping: ARP + ICMP echo over a raw_socket only (the interface needs no IP address).
//   raw_ping responder --interface IF --ip A [--mac M]
//   raw_ping request --interface IF --ip SRC --to DST [--count N]
#include "modes.hpp"
#include "options.hpp"

#include "cli.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <iostream>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  raw_ping::options opts;
  CLI::App app("", "raw_ping");
  raw_ping::describe(app, opts);
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  try {
    asio::io_context io;
    asio_rdma::raw_socket_options socket_options;
    socket_options.send_buffers = 32;
    socket_options.receive_buffers = 256;
    socket_options.max_flows = 4;
    socket_options.backend = opts.backend == "verbs"    ? asio_rdma::raw_backend::verbs
                             : opts.backend == "packet" ? asio_rdma::raw_backend::packet
                                                        : asio_rdma::raw_backend::automatic;
    auto socket = asio_rdma::raw_socket::open(io.get_executor(), opts.interface, socket_options);

    int status = 0;
    bool stop = false;
    asio::signal_set signals(io, SIGINT, SIGTERM);
    std::exception_ptr failure;
    // co_spawn of an awaitable<void>: GCC 12 warns falsely inside Asio for awaitable<int>.
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          status = opts.mode == raw_ping::options::mode_type::responder
                       ? co_await raw_ping::run_responder(socket, opts)
                       : co_await raw_ping::run_requester(socket, opts, stop);
        },
        [&](std::exception_ptr e) {
          failure = e;
          signals.cancel();
        });
    signals.async_wait([&](boost::system::error_code ec, int) {
      if (ec)
        return;
      stop = true; // the requester prints its summary
      if (opts.mode == raw_ping::options::mode_type::responder)
        io.stop();
    });
    io.run();
    if (failure)
      std::rethrow_exception(failure);
    return status;
  } catch (const std::exception& e) {
    std::cerr << "raw_ping: " << e.what() << "\n";
    return 2;
  }
}
