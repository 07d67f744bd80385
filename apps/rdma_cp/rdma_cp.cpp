// rdma_cp: copy files and directory trees to a receiving server over RDMA.
//
//   rdma_cp serve --dir DIR [--bind ADDR] [--port 7472] [--buffer-size N] [--depth D]
//                 [--timeout SECONDS] [--once] [--secret-file F]
//   rdma_cp send HOST[:PORT] PATH... [--buffer-size N] [--depth D] [--timeout SECONDS]
//                [--secret-file F]
//   rdma_cp --help, rdma_cp serve --help, rdma_cp send --help
//
// The server stores what senders send under DIR (names are checked; nothing
// is written outside DIR) and prints each file and each connection's
// throughput. The sender sends each PATH (a file, or a directory with
// everything below it) and prints the throughput. Errors are printed and
// make the program exit non-zero.
#include <asio_rdma/connect.hpp>
#include <asio_rdma/file_transfer.hpp>

#include "cli.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
namespace fs = std::filesystem;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr std::uint16_t default_port = 7472;

struct settings {
  std::string mode;
  std::string host = "0.0.0.0";
  std::uint16_t port = default_port;
  std::string dir;
  std::vector<std::string> paths;
  asio_rdma::file_transfer_options transfer;
  bool once = false;
  std::string secret_file;
};

/// HOST, HOST:PORT, [V6]:PORT.
void parse_target(std::string_view target, settings& s) {
  std::string_view host = target, port;
  if (target.starts_with('[')) {
    auto close = target.find(']');
    if (close == std::string_view::npos)
      throw asio_rdma::cli::usage_error("bad address '" + std::string(target) + "'");
    host = target.substr(1, close - 1);
    if (close + 1 < target.size()) {
      if (target[close + 1] != ':')
        throw asio_rdma::cli::usage_error("bad address '" + std::string(target) + "'");
      port = target.substr(close + 2);
    }
  } else if (auto colon = target.find(':'); colon != std::string_view::npos &&
                                            target.find(':', colon + 1) == std::string_view::npos) {
    host = target.substr(0, colon);
    port = target.substr(colon + 1);
  }
  if (host.empty())
    throw asio_rdma::cli::usage_error("missing host in '" + std::string(target) + "'");
  s.host = host;
  if (!port.empty())
    s.port = static_cast<std::uint16_t>(asio_rdma::cli::parse_number("port", port, 1, 65535));
}

/// The command line: `serve` and `send` subcommands (CLI11).
void describe(CLI::App& app, settings& s) {
  using asio_rdma::cli::add_number;
  using limits = asio_rdma::file_transfer_options;
  app.description("Copy files and directory trees to a receiving server over RDMA");
  app.require_subcommand(1);
  auto* serve = app.add_subcommand("serve", "store what senders send under --dir");
  auto* send = app.add_subcommand("send", "send files and directory trees");
  serve->callback([&s] { s.mode = "serve"; });
  send->callback([&s] { s.mode = "send"; });
  for (auto* sub : {serve, send}) {
    add_number(*sub, "--buffer-size", s.transfer.buffer_size, limits::min_buffer_size,
               limits::max_buffer_size,
               "chunk buffer (k/m/g suffixes); the chunk size is the smaller of both sides'", true);
    add_number(*sub, "--depth", s.transfer.depth, 1, limits::max_depth, "chunks in flight");
    sub->add_option_function<std::string>(
           "--timeout",
           [&s](const std::string& v) {
             s.transfer.timeout =
                 std::chrono::seconds(asio_rdma::cli::parse_number("--timeout", v, 1, 86400));
           },
           "give up after this long without progress")
        ->type_name("SECONDS");
    sub->add_option("--secret-file", s.secret_file,
                    "the shared secret (the file's contents) that senders must prove; WARNING: "
                    "serve without it lets anyone who can reach the port write files into --dir")
        ->type_name("F");
  }
  serve->add_option("--dir", s.dir, "where received files are stored")->required();
  serve->add_option("--bind", s.host, "address to listen on (default 0.0.0.0)");
  add_number(*serve, "--port", s.port, 0, 65535, "port (default 7472)");
  serve->add_flag("--once", s.once, "exit after the first sender");
  send->add_option_function<std::string>(
          "TARGET", [&s](const std::string& v) { parse_target(v, s); },
          "HOST, HOST:PORT or [V6]:PORT")
      ->required()
      ->type_name("HOST[:PORT]");
  send->add_option("PATH", s.paths, "files and directories to send")->required();
}

void print_rate(const char* what, std::uint64_t files, std::uint64_t bytes,
                std::chrono::nanoseconds elapsed, std::size_t chunk) {
  double seconds = std::chrono::duration<double>(elapsed).count();
  double mib_s = seconds > 0 ? bytes / seconds / (1024.0 * 1024.0) : 0.0;
  std::printf("rdma_cp: %s %llu entries, %llu bytes in %.3f s (%.2f MiB/s, %.1f Mb/s), chunk %zu\n",
              what, static_cast<unsigned long long>(files), static_cast<unsigned long long>(bytes),
              seconds, mib_s, seconds > 0 ? bytes * 8 / seconds / 1e6 : 0.0, chunk);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- serve

int serve(asio::io_context& io, const settings& s) {
  asio_rdma::file_receiver_options options;
  options.transfer = s.transfer;
  options.on_file = [](const asio_rdma::received_file& f) {
    std::printf("rdma_cp: received %s%s (%llu bytes)\n", f.name.c_str(), f.directory ? "/" : "",
                static_cast<unsigned long long>(f.size));
    std::fflush(stdout);
  };
  asio_rdma::file_receiver receiver(io.get_executor(), s.host, s.port, s.dir, options);
  if (s.transfer.secret.empty())
    std::fprintf(stderr, "rdma_cp: WARNING: serving without --secret-file: anyone who can reach "
                         "this port can write files into the directory\n");
  std::printf("rdma_cp: serving %s on %s\n", receiver.directory().c_str(),
              receiver.local_endpoint().address().to_string().c_str());
  std::printf("rdma_cp: port %u\n", receiver.local_endpoint().port());
  std::fflush(stdout);
  int status = 0;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto ec, int) {
    if (!ec)
      receiver.stop();
  });
  auto report = [&](asio_rdma::error_code ec, const asio_rdma::receive_result& r) {
    std::ostringstream peer;
    peer << r.peer;
    if (ec) {
      std::fprintf(stderr, "rdma_cp: connection from %s failed: %s\n", peer.str().c_str(),
                   ec.message().c_str());
      status = 1;
    }
    std::string what = "from " + peer.str() + ":";
    print_rate(what.c_str(), r.files.size(), r.bytes, r.elapsed, r.chunk_size);
  };
  if (s.once) {
    receiver.async_receive_one([&](asio_rdma::error_code ec, asio_rdma::receive_result r) {
      report(ec, r);
      signals.cancel();
    });
  } else {
    receiver.async_run(report, [&](asio_rdma::error_code ec) {
      if (ec && ec != asio::error::operation_aborted) {
        std::fprintf(stderr, "rdma_cp: server failed: %s\n", ec.message().c_str());
        status = 1;
      }
      signals.cancel();
    });
  }
  io.run();
  return status;
}

// ---------------------------------------------------------------- send

awaitable<void> send(settings s) {
  auto ex = co_await asio::this_coro::executor;
  for (const auto& path : s.paths) { // local mistakes before connecting
    std::error_code fec;
    if (!fs::exists(fs::status(path, fec)))
      throw std::runtime_error(path + ": " +
                               (fec ? fec.message() : std::string("No such file or directory")));
  }
  asio_rdma::connection_options options;
  options.timeout = s.transfer.timeout;
  auto conn = co_await asio_rdma::async_connect(ex, s.host, s.port, options, use_awaitable);
  asio_rdma::transfer_result total;
  auto start = std::chrono::steady_clock::now();
  for (const auto& path : s.paths) {
    std::error_code fec;
    bool tree = fs::is_directory(path, fec);
    std::tuple<asio_rdma::error_code, asio_rdma::transfer_result> outcome;
    if (tree)
      outcome = co_await asio_rdma::async_send_tree(conn, path, s.transfer,
                                                    asio::as_tuple(use_awaitable));
    else
      outcome = co_await asio_rdma::async_send_file(conn, path, s.transfer,
                                                    asio::as_tuple(use_awaitable));
    auto& [ec, r] = outcome;
    if (ec)
      throw boost::system::system_error(ec, path);
    total.files += r.files;
    total.bytes += r.bytes;
    total.chunk_size = r.chunk_size;
  }
  total.elapsed = std::chrono::steady_clock::now() - start;
  co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
  print_rate("sent", total.files, total.bytes, total.elapsed, total.chunk_size);
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app("", "rdma_cp");
  describe(app, s);
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  if (!s.secret_file.empty()) {
    std::ifstream in(s.secret_file, std::ios::binary);
    s.transfer.secret.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    while (!s.transfer.secret.empty() &&
           (s.transfer.secret.back() == '\n' || s.transfer.secret.back() == '\r'))
      s.transfer.secret.pop_back(); // a file written by echo or an editor
    if (!in.good() && !in.eof()) {
      std::cerr << "rdma_cp: --secret-file " << s.secret_file << ": cannot read it\n";
      return 2;
    }
    if (s.transfer.secret.empty()) {
      std::cerr << "rdma_cp: --secret-file " << s.secret_file << ": missing or empty\n";
      return 2;
    }
  }
  if (auto problem = s.transfer.problem()) {
    std::cerr << "rdma_cp: " << problem << "\n";
    return 2;
  }
  asio::io_context io;
  try {
    if (s.mode == "serve")
      return serve(io, s);
    int status = 0;
    asio::co_spawn(io, send(s), [&](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << "rdma_cp: " << x.what() << std::endl;
      }
      status = 1;
    });
    io.run();
    return status;
  } catch (const std::exception& e) {
    std::cerr << "rdma_cp: " << e.what() << std::endl;
    return 1;
  }
}
