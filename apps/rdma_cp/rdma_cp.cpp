// rdma_cp: copy files and directory trees to a receiving server over RDMA.
//
//   rdma_cp serve --dir DIR [--bind ADDR] [--port 7472] [--buffer-size N] [--depth D]
//                 [--timeout SECONDS] [--once] [--secret-file F] [--resume-max-age SECONDS]
//                 [--disk-threads N] [--overwrite refuse|replace|keep-both]
//                 [--max-file-size BYTES] [--max-connections-per-peer N]
//                 [--max-files-per-peer N] [--no-fsync]
//   rdma_cp send HOST[:PORT] PATH... [--buffer-size N] [--depth D] [--timeout SECONDS]
//                [--secret-file F] [--json] [--no-progress] [--resume]
//   rdma_cp --help, rdma_cp serve --help, rdma_cp send --help
//
// The server stores what senders send under DIR (names are checked; nothing
// is written outside DIR) and prints each file and each connection's
// throughput. The sender sends each PATH (a file, or a directory with
// everything below it), shows its progress on stderr (a bar on a terminal,
// plain lines otherwise) and prints the throughput, or with --json a summary
// for scripts. Errors are printed, named by what happened, and make the
// program exit non-zero.
#include <asio_rdma/connect.hpp>
#include <asio_rdma/file_transfer.hpp>

#include "cli.hpp"
#include "progress.hpp"

#include <nlohmann/json.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
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
  bool json = false;
  bool no_progress = false;
  std::chrono::seconds resume_max_age = std::chrono::hours(24);
  unsigned disk_threads = 1;
  // The receiver's policies (serve); defaults are file_receiver_options'.
  asio_rdma::overwrite_policy overwrite = asio_rdma::overwrite_policy::refuse;
  std::uint64_t max_file_size = std::uint64_t(-1);
  std::size_t max_connections_per_peer =
      asio_rdma::file_receiver_options().max_connections_per_peer;
  std::size_t max_files_per_peer = asio_rdma::file_receiver_options().max_files_in_flight_per_peer;
  bool no_fsync = false;
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
  add_number(*serve, "--disk-threads", s.disk_threads, 0, 64,
             "threads that write received chunks to disk (default 1; 0: the receiving thread "
             "itself, between network events)");
  serve
      ->add_option_function<std::string>(
          "--resume-max-age",
          [&s](const std::string& v) {
            s.resume_max_age = std::chrono::seconds(
                asio_rdma::cli::parse_number("--resume-max-age", v, 0, 10ull * 365 * 86400));
          },
          "keep what arrived of an interrupted `send --resume` this long for the sender to "
          "resume (default 86400; older ones are removed at start; 0: keep nothing)")
      ->type_name("SECONDS");
  serve
      ->add_option_function<std::string>(
          "--overwrite",
          [&s](const std::string& v) {
            using asio_rdma::overwrite_policy;
            if (v == "refuse")
              s.overwrite = overwrite_policy::refuse;
            else if (v == "replace")
              s.overwrite = overwrite_policy::replace;
            else if (v == "keep-both")
              s.overwrite = overwrite_policy::keep_both;
            else
              throw asio_rdma::cli::usage_error("--overwrite: '" + v +
                                                "' is not one of refuse, replace, keep-both");
          },
          "a file whose name exists: refuse it (default; the sender fails with \"file exists on "
          "receiver\"), replace the old one atomically, or keep-both (NAME.1.EXT, NAME.2.EXT...)")
      ->type_name("POLICY");
  add_number(*serve, "--max-file-size", s.max_file_size, 0, std::uint64_t(-1),
             "refuse larger files before anything is written (k/m/g suffixes; default: no limit "
             "but the free space)",
             true);
  add_number(*serve, "--max-connections-per-peer", s.max_connections_per_peer, 0, 1u << 20,
             "connections served at once from one address; more are refused (default 16; 0: no "
             "limit)");
  add_number(*serve, "--max-files-per-peer", s.max_files_per_peer, 0, 1u << 20,
             "files received at once from one address over all its connections; more are "
             "refused (default 8; 0: no limit)");
  serve->add_flag("--no-fsync", s.no_fsync,
                  "do not fsync files and the directory before a file is reported stored (faster; "
                  "a crash of this host may lose files the senders were told are stored)");
  send->add_option_function<std::string>(
          "TARGET", [&s](const std::string& v) { parse_target(v, s); },
          "HOST, HOST:PORT or [V6]:PORT")
      ->required()
      ->type_name("HOST[:PORT]");
  send->add_option("PATH", s.paths, "files and directories to send")->required();
  send->add_flag("--json", s.json,
                 "print a JSON summary on stdout (status, files, bytes, seconds, rate; the error "
                 "if any) instead of the text line");
  send->add_flag("--resume", s.transfer.resume,
                 "continue files an interrupted earlier `send --resume` left on the receiver "
                 "(verified by CRC-32C), and let the receiver keep this transfer's files if it "
                 "is interrupted");
  send->add_flag("--no-progress", s.no_progress,
                 "no progress on stderr (default: a bar on a terminal, a line a second otherwise)");
}

/// What happened, in words, for an error that ended a connection. `peer` is
/// the other side ("receiver" or "sender"): a bare "End of file" or a
/// flushed work request means the peer went away.
std::string describe(asio_rdma::error_code ec, const char* peer) {
  using asio_rdma::wc_condition;
  std::string who = peer;
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::not_connected || ec == wc_condition::flushed)
    return who + " closed the connection";
  if (ec == wc_condition::transport)
    return who + " unreachable: the transport gave up (host down or link lost)";
  if (ec == wc_condition::remote)
    return who + " refused an RDMA access (" + ec.message() + ")";
  if (ec == asio::error::timed_out)
    return "timed out waiting for the " + who;
  if (ec == asio::error::connection_refused)
    return "connection refused (nothing listening on that port?)";
  if (ec == asio_rdma::errc::remote_failure)
    return who + " could not create or write the file, or found its size or checksum wrong "
                 "(see the receiver's log)";
  if (ec == asio_rdma::errc::store_failed)
    return who + " had the whole file but its filesystem refused to store it under its name "
                 "(see the receiver's log)";
  return ec.message();
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
  // Disk writes and checksums run on a thread of their own, off the thread
  // that receives (file_receiver_options::disk_executor).
  std::optional<asio::thread_pool> disk;
  asio_rdma::file_receiver_options options;
  if (s.disk_threads > 0) {
    disk.emplace(s.disk_threads);
    options.disk_executor = disk->get_executor();
  }
  options.transfer = s.transfer;
  // Every buffer of a connection's send queue is max_message_size (64 KiB)
  // of registered memory, and registering is much of a connection's set-up:
  // the receiver sends only small messages, at most its credit ring (2 x
  // depth) and a status or two at once.
  options.acceptor.connection.send_queue_depth = 2u * s.transfer.depth + 8;
  options.resume_max_age = s.resume_max_age;
  options.overwrite = s.overwrite;
  options.max_file_size = s.max_file_size;
  options.max_connections_per_peer = s.max_connections_per_peer;
  options.max_files_in_flight_per_peer = s.max_files_per_peer;
  options.fsync = !s.no_fsync;
  // Not flushed per file (a write and a wake-up of whoever reads the log, per
  // file of a tree): a terminal gets each line anyway, a pipe or a file gets
  // them by the buffer and at the end of each connection (report below).
  options.on_file = [](const asio_rdma::received_file& f) {
    std::printf("rdma_cp: received %s%s (%llu bytes)\n", f.name.c_str(), f.directory ? "/" : "",
                static_cast<unsigned long long>(f.size));
  };
  std::optional<asio_rdma::file_receiver> made;
  try {
    made.emplace(io.get_executor(), s.host, s.port, s.dir, options);
  } catch (const boost::system::system_error& e) {
    // A directory that cannot hold files is a usage error, found before any
    // sender's data flows ("cannot store files in DIR: STEP: ERROR").
    std::string_view what = e.what();
    if (what.starts_with("cannot store files in ")) {
      // Boost appends the code (" [system:30]"); the words say it already.
      if (auto code = what.rfind(" ["); code != what.npos && what.ends_with(']'))
        what = what.substr(0, code);
      std::fprintf(stderr, "rdma_cp: %.*s\n", static_cast<int>(what.size()), what.data());
      return 2;
    }
    throw;
  }
  auto& receiver = *made;
  if (s.transfer.secret.empty())
    std::fprintf(stderr, "rdma_cp: WARNING: serving without --secret-file: anyone who can reach "
                         "this port can write files into the directory\n");
  std::printf("rdma_cp: serving %s on %s\n", receiver.directory().c_str(),
              receiver.local_endpoint().address().to_string().c_str());
  std::printf("rdma_cp: port %u\n", receiver.local_endpoint().port());
  std::printf("rdma_cp: files are committed by %s\n",
              receiver.commit_method() == asio_rdma::commit_method::rename_noreplace
                  ? "renameat2(RENAME_NOREPLACE)"
                  : "link() and unlink() (the filesystem refuses rename flags)");
  auto per_peer = [](std::size_t n) {
    return n == 0 ? std::string("unlimited") : std::to_string(n);
  };
  static constexpr const char* overwrite_names[] = {"refuse", "replace", "keep-both"};
  std::printf("rdma_cp: policies: overwrite %s, fsync %s, max file size %s, per peer %s "
              "connections and %s files at once\n",
              overwrite_names[static_cast<int>(options.overwrite)], options.fsync ? "on" : "off",
              options.max_file_size == std::uint64_t(-1)
                  ? "none"
                  : std::to_string(options.max_file_size).c_str(),
              per_peer(options.max_connections_per_peer).c_str(),
              per_peer(options.max_files_in_flight_per_peer).c_str());
  std::fflush(stdout);
  int status = 0;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](auto ec, int) {
    if (!ec)
      receiver.stop();
  });
  auto report = [&](asio_rdma::error_code ec, const asio_rdma::receive_result& r) {
    std::fflush(stdout); // the connection's files before its outcome
    std::ostringstream peer;
    peer << r.peer;
    if (ec) {
      std::fprintf(stderr, "rdma_cp: connection from %s failed: %s\n", peer.str().c_str(),
                   r.failure.empty() ? describe(ec, "sender").c_str() : r.failure.c_str());
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

/// The bytes the library will send for PATH (regular files, links not
/// followed), for the progress display's total.
std::uint64_t bytes_below(const fs::path& path) {
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec)
    return 0;
  if (fs::is_regular_file(st))
    return fs::file_size(path, ec);
  std::uint64_t total = 0;
  if (fs::is_directory(st))
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec) && !it->is_symlink(ec))
        total += it->file_size(ec);
  return total;
}

struct send_outcome {
  asio_rdma::transfer_result total;
  std::string error; ///< empty: success
  std::string path;  ///< where it failed
};

awaitable<void> send(settings s, send_outcome& out) {
  auto ex = co_await asio::this_coro::executor;
  for (const auto& path : s.paths) { // local mistakes before connecting
    std::error_code fec;
    if (!fs::exists(fs::status(path, fec))) {
      out.path = path;
      out.error = fec ? fec.message() : std::string("No such file or directory");
      co_return;
    }
  }
  // Without a display, no total (a stat per file) and no progress callback
  // (a clock read per chunk).
  std::uint64_t total_bytes = 0;
  if (!s.no_progress)
    for (const auto& path : s.paths)
      total_bytes += bytes_below(path);
  using style = rdma_cp::progress_display::style;
  rdma_cp::progress_display progress(
      s.no_progress ? style::none : rdma_cp::progress_display::for_stream(stderr), total_bytes);
  std::uint64_t before = 0; // bytes of the paths already sent
  s.transfer.progress_interval = progress.interval();
  if (!s.no_progress)
    s.transfer.on_progress = [&](const asio_rdma::transfer_progress& p) {
      progress.update(p, before);
    };
  asio_rdma::connection_options options;
  options.timeout = s.transfer.timeout;
  // Sized to what a transfer has in flight (see serve): chunks (depth) and
  // control messages (8) and batches (2) out; credits and statuses in.
  options.send_queue_depth = s.transfer.depth + 16u;
  options.receive_queue_depth = s.transfer.depth + 16u;
  auto [cec, conn] =
      co_await asio_rdma::async_connect(ex, s.host, s.port, options, asio::as_tuple(use_awaitable));
  if (cec) {
    out.path = s.host + ":" + std::to_string(s.port);
    out.error = describe(cec, "receiver");
    co_return;
  }
  auto& total = out.total;
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
    total.files += r.files;
    total.bytes += r.bytes;
    total.bytes_sent += r.bytes_sent;
    total.bytes_resumed += r.bytes_resumed;
    if (r.chunk_size)
      total.chunk_size = r.chunk_size;
    before += r.bytes;
    if (ec) {
      progress.finish();
      out.path = path;
      out.error = describe(ec, "receiver");
      break;
    }
  }
  progress.finish();
  total.elapsed = std::chrono::steady_clock::now() - start;
  if (out.error.empty())
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
}

void print_json(const send_outcome& out) {
  const auto& t = out.total;
  nlohmann::ordered_json j;
  j["status"] = out.error.empty() ? "ok" : "error";
  if (!out.error.empty()) {
    j["error"] = out.error;
    j["path"] = out.path;
  }
  j["files"] = t.files;
  j["bytes"] = t.bytes;
  j["bytes_sent"] = t.bytes_sent;
  j["bytes_resumed"] = t.bytes_resumed;
  j["seconds"] = std::chrono::duration<double>(t.elapsed).count();
  j["bytes_per_second"] = t.bytes_per_second();
  j["chunk_size"] = t.chunk_size;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
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
    send_outcome out;
    asio::co_spawn(io, send(s, out), [&](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        out.error = x.what();
      }
    });
    io.run();
    if (!out.error.empty())
      std::cerr << "rdma_cp: " << (out.path.empty() ? "" : out.path + ": ") << out.error
                << std::endl;
    if (s.json)
      print_json(out);
    else if (out.error.empty())
      print_rate("sent", out.total.files, out.total.bytes, out.total.elapsed, out.total.chunk_size);
    if (!s.json && out.total.bytes_resumed > 0)
      std::printf("rdma_cp: resumed %llu bytes the receiver had, sent %llu bytes\n",
                  static_cast<unsigned long long>(out.total.bytes_resumed),
                  static_cast<unsigned long long>(out.total.bytes_sent));
    return out.error.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "rdma_cp: " << e.what() << std::endl;
    return 1;
  }
}
