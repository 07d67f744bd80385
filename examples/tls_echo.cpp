// A TLS 1.3 echo over RDMA: asio::ssl::stream<asio_rdma::stream>, a line at a time. The
// server presents CERT (its key KEY); the client trusts only CA_FILE and checks that the
// certificate is for the name "tls-echo".
//
//   tls_echo server ADDR PORT CERT KEY
//   tls_echo client ADDR PORT CA_FILE LINE...    prints each echoed line
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::awaitable;
using asio::use_awaitable;
using tls_stream = ssl::stream<asio_rdma::stream>;

/// TLS 1.3 only.
ssl::context make_context(ssl::context::method method) {
  ssl::context ctx(method);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  return ctx;
}

awaitable<void> echo(tls_stream tls) {
  auto [hec] = co_await tls.async_handshake(ssl::stream_base::server, asio::as_tuple(use_awaitable));
  if (hec) {
    std::cout << "server: handshake failed: " << hec.message() << std::endl;
    co_return;
  }
  std::string buffer;
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(tls, asio::dynamic_buffer(buffer), '\n',
                                                   asio::as_tuple(use_awaitable));
    if (ec) // the client's TLS close_notify (stream_truncated if it just closed)
      break;
    co_await asio::async_write(tls, asio::buffer(buffer.data(), n), use_awaitable);
    buffer.erase(0, n);
  }
  co_await tls.async_shutdown(asio::as_tuple(use_awaitable));
}

awaitable<void> serve(std::string addr, std::uint16_t port, std::string cert, std::string key) {
  auto ex = co_await asio::this_coro::executor;
  auto ctx = make_context(ssl::context::tls_server);
  ctx.use_certificate_chain_file(cert);
  ctx.use_private_key_file(key, ssl::context::pem);
  asio_rdma::acceptor_options options;
  options.connection = asio_rdma::stream_connection_options();
  asio_rdma::acceptor acceptor(ex, addr, port, options);
  std::cout << "listening on " << addr << ":" << port << std::endl;
  for (;;) {
    auto stream = co_await acceptor.async_accept_stream(use_awaitable);
    asio::co_spawn(ex, echo(tls_stream(std::move(stream), ctx)), asio::detached);
  }
}

awaitable<void> client(std::string addr, std::uint16_t port, std::string ca,
                       std::vector<std::string> lines) {
  auto ex = co_await asio::this_coro::executor;
  auto ctx = make_context(ssl::context::tls_client);
  ctx.load_verify_file(ca);
  ctx.set_verify_mode(ssl::verify_peer);
  // Not `tls(co_await ..., ctx)`: GCC 12 may destroy a temporary of a co_await inside a
  // call's arguments twice.
  auto connected = co_await asio_rdma::async_connect_stream(ex, addr, port, use_awaitable);
  tls_stream tls(std::move(connected), ctx);
  tls.set_verify_callback(ssl::host_name_verification("tls-echo"));
  co_await tls.async_handshake(ssl::stream_base::client, use_awaitable);
  std::string buffer;
  for (const auto& line : lines) {
    co_await asio::async_write(tls, asio::buffer(line + "\n"), use_awaitable);
    auto n = co_await asio::async_read_until(tls, asio::dynamic_buffer(buffer), '\n',
                                             use_awaitable);
    std::cout << buffer.substr(0, n - 1) << std::endl;
    buffer.erase(0, n);
  }
  co_await tls.async_shutdown(asio::as_tuple(use_awaitable));
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!((mode == "server" && argc == 6) || (mode == "client" && argc >= 6))) {
    std::cerr << "usage: tls_echo server ADDR PORT CERT KEY\n"
                 "       tls_echo client ADDR PORT CA_FILE LINE...\n";
    return 2;
  }
  asio::io_context io;
  int status = 0;
  auto finish = [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "tls_echo: " << x.what() << std::endl;
      }
      status = 1;
    }
    io.stop();
  };
  const auto port = static_cast<std::uint16_t>(std::stoi(argv[3]));
  if (mode == "server")
    asio::co_spawn(io, serve(argv[2], port, argv[4], argv[5]), finish);
  else
    asio::co_spawn(io, client(argv[2], port, argv[4], std::vector<std::string>(argv + 5, argv + argc)),
                   finish);
  io.run();
  return status;
}
