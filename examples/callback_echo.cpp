// A callback-style service, without coroutines (for users of an event loop
// with callbacks such as ibmsg's): the server decides each connection request
// (accept or reject by its private data), is told when a connection is
// established, and gets each message in a callback. The client is written
// the same way.
//
//   callback_echo server ADDR PORT TOKEN      accepts clients that send TOKEN
//   callback_echo client ADDR PORT TOKEN N    sends N messages, checks the echoes
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>

#include <array>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio_rdma::error_code;

// One accepted connection: receive a message, echo it, receive the next.
class session : public std::enable_shared_from_this<session> {
public:
  explicit session(asio_rdma::connection conn)
      : conn_(std::move(conn)), buffer_(conn_.options().max_message_size) {}

  void start() { receive(); }

private:
  void receive() {
    conn_.async_receive(
        asio::buffer(buffer_),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_message(ec, n); });
  }
  void on_message(error_code ec, std::size_t n) {
    if (ec) { // asio::error::eof when the client disconnects
      std::cout << "server: connection closed (" << ec.message() << ")" << std::endl;
      return;
    }
    conn_.async_send(asio::buffer(buffer_.data(), n),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       if (!ec)
                         self->receive();
                     });
  }

  asio_rdma::connection conn_;
  std::vector<std::byte> buffer_;
};

class server {
public:
  server(asio::io_context& io, const std::string& addr, int port, std::string token)
      : acceptor_(io.get_executor(), addr, static_cast<std::uint16_t>(port)),
        token_(std::move(token)) {}

  void start() {
    acceptor_.async_accept_request([this](error_code ec, asio_rdma::connection_request request) {
      if (!ec)
        on_request(std::move(request));
      if (ec != asio::error::operation_aborted)
        start();
    });
  }

private:
  // A connection request: accept it if its private data starts with the token.
  void on_request(asio_rdma::connection_request request) {
    auto data = request.private_data(); // zero-padded by the CM
    std::string sent(reinterpret_cast<const char*>(data.data()), data.size());
    bool ok = sent.compare(0, token_.size(), token_) == 0 &&
              (sent.size() == token_.size() || sent[token_.size()] == '\0');
    if (!ok) {
      std::cout << "server: rejected " << request.remote_endpoint() << std::endl;
      std::string reason = "bad token";
      request.reject(std::as_bytes(std::span(reason)));
      return;
    }
    request.async_accept(asio_rdma::connection_options{},
                         [](error_code ec, asio_rdma::connection conn) {
                           if (!ec)
                             on_established(std::move(conn));
                         });
  }
  static void on_established(asio_rdma::connection conn) {
    std::cout << "server: established with " << conn.remote_endpoint() << std::endl;
    std::make_shared<session>(std::move(conn))->start();
  }

  asio_rdma::acceptor acceptor_;
  std::string token_;
};

// The client: connect with the token as private data, then N round trips.
class client {
public:
  client(asio::io_context& io, std::string token, int count)
      : io_(io), token_(std::move(token)), remaining_(count) {}

  void start(const std::string& addr, int port) {
    asio_rdma::connection_options options;
    auto bytes = std::as_bytes(std::span(token_));
    options.private_data.assign(bytes.begin(), bytes.end());
    asio_rdma::async_connect(io_.get_executor(), addr, static_cast<std::uint16_t>(port), options,
                             [this](error_code ec, asio_rdma::connection conn) {
                               if (ec) {
                                 std::cout << "client: connect failed: " << ec.message()
                                           << std::endl;
                                 return;
                               }
                               conn_ = std::move(conn);
                               send_next();
                             });
  }
  bool ok() const { return remaining_ == 0; }

private:
  void send_next() {
    if (remaining_ == 0) {
      std::cout << "client: all echoes matched" << std::endl;
      conn_.async_disconnect([](error_code) {});
      return;
    }
    message_ = "message " + std::to_string(remaining_);
    conn_.async_send(asio::buffer(message_), [this](error_code ec, std::size_t) {
      if (ec)
        return;
      conn_.async_receive(asio::buffer(reply_), [this](error_code ec, std::size_t n) {
        if (ec || std::string(reply_.data(), n) != message_) {
          std::cout << "client: bad echo" << std::endl;
          return;
        }
        --remaining_;
        send_next();
      });
    });
  }

  asio::io_context& io_;
  std::string token_;
  int remaining_;
  asio_rdma::connection conn_;
  std::string message_;
  std::array<char, 64> reply_{};
};

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  if (!((role == "server" && argc == 5) || (role == "client" && argc == 6))) {
    std::cerr << "usage: callback_echo server ADDR PORT TOKEN\n"
                 "       callback_echo client ADDR PORT TOKEN N\n";
    return 2;
  }
  try {
    asio::io_context io;
    if (role == "server") {
      server s(io, argv[2], std::stoi(argv[3]), argv[4]);
      s.start();
      std::cout << "callback_echo: listening on port " << argv[3] << std::endl;
      asio::signal_set signals(io, SIGINT, SIGTERM);
      signals.async_wait([&](auto, int) { io.stop(); });
      io.run();
      return 0;
    }
    client c(io, argv[4], std::stoi(argv[5]));
    c.start(argv[2], std::stoi(argv[3]));
    io.run();
    return c.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "callback_echo: " << e.what() << "\n";
    return 1;
  }
}
