// An HTTP file server and client with Boost.Beast, over RDMA and over TCP with the
// same code: the HTTP handling is written once for any Asio stream
// (AsyncReadStream + AsyncWriteStream); asio_rdma::stream or tcp::socket is the only
// difference.
//
//   http_file_server serve ADDR PORT ROOT          serves ROOT's files: HTTP over RDMA on
//                                                  PORT, over TCP on PORT + 1
//   http_file_server get rdma|tcp ADDR PORT PATH   GETs PATH, writes the body to stdout
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <filesystem>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

// ---------------------------------------------------------------- the HTTP code

/// The response to `req`: the file under `root`, or an error page.
http::message_generator respond(const http::request<http::string_body>& req,
                                const std::filesystem::path& root) {
  auto page = [&req](http::status status, std::string text) {
    http::response<http::string_body> res{status, req.version()};
    res.set(http::field::content_type, "text/plain");
    res.keep_alive(req.keep_alive());
    res.body() = std::move(text);
    res.prepare_payload();
    return http::message_generator(std::move(res));
  };
  const std::string target(req.target());
  if (req.method() != http::verb::get)
    return page(http::status::bad_request, "only GET\n");
  if (target.empty() || target[0] != '/' || target.find("..") != std::string::npos)
    return page(http::status::bad_request, "bad path\n");
  http::file_body::value_type file;
  beast::error_code ec;
  file.open((root / target.substr(1)).c_str(), beast::file_mode::scan, ec);
  if (ec)
    return page(http::status::not_found, target + " not found\n");
  http::response<http::file_body> res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/octet-stream");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(file);
  res.prepare_payload();
  return http::message_generator(std::move(res));
}

/// Ends this side's data: TCP's shutdown(send), or the RDMA stream's async_shutdown.
awaitable<void> shutdown_send(tcp::socket& s) {
  beast::error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
  co_return;
}
awaitable<void> shutdown_send(asio_rdma::stream& s) {
  co_await s.async_shutdown(asio::as_tuple(use_awaitable));
}

/// Serves requests on one connection of either kind until the client is done.
template <typename Stream> awaitable<void> serve_http(Stream stream, std::filesystem::path root) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    auto [ec, n] = co_await http::async_read(stream, buffer, req, asio::as_tuple(use_awaitable));
    if (ec == http::error::end_of_stream)
      break;
    if (ec) {
      std::cerr << "server: " << ec.message() << std::endl;
      co_return;
    }
    const bool keep_alive = req.keep_alive();
    co_await beast::async_write(stream, respond(req, root), use_awaitable);
    if (!keep_alive)
      break;
  }
  co_await shutdown_send(stream);
}

/// GETs `target` on a connection of either kind: the body to stdout, the status to stderr.
template <typename Stream> awaitable<int> get(Stream& stream, std::string target) {
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "asio-rdma-example");
  req.keep_alive(false);
  co_await http::async_write(stream, req, use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 30);
  co_await http::async_read(stream, buffer, parser, use_awaitable);
  const auto& res = parser.get();
  std::cerr << "client: " << res.result_int() << " " << res.reason() << ", " << res.body().size()
            << " bytes" << std::endl;
  std::cout << res.body() << std::flush;
  co_return res.result() == http::status::ok ? 0 : 1;
}

// ---------------------------------------------------------------- the two transports

awaitable<void> serve_rdma(std::string addr, std::uint16_t port, std::filesystem::path root) {
  auto ex = co_await asio::this_coro::executor;
  asio_rdma::acceptor_options options;
  options.connection = asio_rdma::stream_connection_options(); // no data in its buffers
  asio_rdma::acceptor acceptor(ex, addr, port, options);
  for (;;) {
    auto stream = co_await acceptor.async_accept_stream(use_awaitable);
    asio::co_spawn(ex, serve_http(std::move(stream), root), asio::detached);
  }
}

awaitable<void> serve_tcp(std::string addr, std::uint16_t port, std::filesystem::path root) {
  auto ex = co_await asio::this_coro::executor;
  tcp::acceptor acceptor(ex, tcp::endpoint(asio::ip::make_address(addr), port));
  for (;;) {
    auto socket = co_await acceptor.async_accept(use_awaitable);
    asio::co_spawn(ex, serve_http(std::move(socket), root), asio::detached);
  }
}

awaitable<int> get_rdma(std::string addr, std::uint16_t port, std::string target) {
  auto ex = co_await asio::this_coro::executor;
  auto stream = co_await asio_rdma::async_connect_stream(ex, addr, port, use_awaitable);
  co_return co_await get(stream, target);
}

awaitable<int> get_tcp(std::string addr, std::uint16_t port, std::string target) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket socket(ex);
  co_await socket.async_connect(tcp::endpoint(asio::ip::make_address(addr), port), use_awaitable);
  co_return co_await get(socket, target);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!((mode == "serve" && argc == 5) || (mode == "get" && argc == 6))) {
    std::cerr << "usage: http_file_server serve ADDR PORT ROOT\n"
                 "       http_file_server get rdma|tcp ADDR PORT PATH\n";
    return 2;
  }
  asio::io_context io;
  int status = 0;
  auto finish = [&](std::exception_ptr e, int rc = 0) {
    status = rc;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "http_file_server: " << x.what() << std::endl;
      }
      status = 1;
    }
    io.stop();
  };
  try {
    if (mode == "serve") {
      const auto port = static_cast<std::uint16_t>(std::stoi(argv[3]));
      asio::co_spawn(io, serve_rdma(argv[2], port, argv[4]), finish);
      asio::co_spawn(io, serve_tcp(argv[2], port + 1, argv[4]), finish);
      std::cout << "serving " << argv[4] << ": rdma " << argv[2] << ":" << port << ", tcp "
                << argv[2] << ":" << port + 1 << std::endl;
    } else {
      const std::string kind = argv[2];
      const auto port = static_cast<std::uint16_t>(std::stoi(argv[4]));
      if (kind == "rdma")
        asio::co_spawn(io, get_rdma(argv[3], port, argv[5]), finish);
      else
        asio::co_spawn(io, get_tcp(argv[3], port, argv[5]), finish);
    }
    io.run();
  } catch (const std::exception& x) {
    std::cerr << "http_file_server: " << x.what() << std::endl;
    return 1;
  }
  return status;
}
