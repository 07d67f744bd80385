#include "options.hpp"

#include "cli.hpp"
#include "wire.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <stdexcept>

namespace rdma_bench {

using asio_rdma::cli::parse_number;
using asio_rdma::cli::usage_error;

std::string_view name(operation op) {
  switch (op) {
  case operation::send:
    return "send";
  case operation::write:
    return "write";
  case operation::write_imm:
    return "write_imm";
  case operation::read:
    return "read";
  case operation::fetch_add:
    return "fetch_add";
  case operation::compare_swap:
    return "compare_swap";
  case operation::ud_send:
    return "ud_send";
  case operation::stream:
    return "stream";
  case operation::rpc:
    return "rpc";
  }
  return "?";
}

std::string_view name(test_mode mode) {
  return mode == test_mode::latency ? "lat" : "bw";
}

std::string_view name(completion_mode mode) {
  switch (mode) {
  case completion_mode::event:
    return "event";
  case completion_mode::busy:
    return "busy";
  case completion_mode::adaptive:
    return "adaptive";
  }
  return "?";
}

namespace {

operation parse_operation(std::string_view text) {
  for (auto op : {operation::send, operation::write, operation::write_imm, operation::read,
                  operation::fetch_add, operation::compare_swap, operation::ud_send,
                  operation::stream, operation::rpc})
    if (text == name(op))
      return op;
  throw usage_error("--op: unknown operation '" + std::string(text) + "'");
}

double parse_seconds(std::string_view option, std::string_view text, double min) {
  std::string copy(text);
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(copy, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != copy.size() || copy.empty() || !std::isfinite(value))
    throw usage_error(std::string(option) + ": '" + copy + "' is not a number of seconds");
  if (value < min || value > 3600)
    throw usage_error(std::string(option) + ": " + copy + " is out of range");
  return value;
}

std::vector<std::size_t> parse_sizes(std::string_view option, std::string_view text) {
  std::vector<std::size_t> sizes;
  while (!text.empty()) {
    auto comma = text.find(',');
    sizes.push_back(parse_number(option, text.substr(0, comma), 1, 1u << 30, true));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (sizes.empty())
    throw usage_error(std::string(option) + " needs at least one size");
  return sizes;
}

} // namespace

void describe(CLI::App& app, settings& s) {
  using asio_rdma::cli::add_either;
  using asio_rdma::cli::add_number;
  app.description("RDMA throughput and latency, on asio_rdma or on plain ibverbs/rdmacm "
                  "(see docs/rdma_bench.md)");
  app.require_subcommand(1);
  auto* server = app.add_subcommand("server", "answer clients (all tests, any number at once)");
  auto* client = app.add_subcommand("client", "run a test against a server");
  server->callback([&s] { s.role = "server"; });
  client->callback([&s] { s.role = "client"; });

  for (auto* sub : {server, client}) {
    add_number(*sub, "--port", s.port, 1, 65535, "TCP/RDMA port (default 7472)");
    sub->add_flag("--raw-verbs", s.raw_verbs,
                  "baseline on plain ibverbs/rdmacm (a client needs 'server --raw-verbs')");
    sub->add_flag("--quiet", s.quiet, "no progress lines");
  }
  server->add_option("--bind", s.host, "address to listen on (default 0.0.0.0)");

  client->add_option("HOST", s.host, "the server's address")->required();
  client
      ->add_option_function<std::string>(
          "--op", [&s](const std::string& v) { s.op = parse_operation(v); },
          "send|write|write_imm|read|fetch_add|compare_swap|ud_send|stream|rpc (default send; "
          "ud_send: datagrams, at most the path MTU each; stream: asio_rdma::stream, "
          "async_write / async_read; rpc: asio_rdma::rpc echo calls, --depth in flight)")
      ->type_name("OP");
  client
      ->add_option_function<std::string>(
          "--mode",
          [&s](const std::string& v) {
            if (v == "bw" || v == "bandwidth")
              s.mode = test_mode::bandwidth;
            else if (v == "lat" || v == "latency")
              s.mode = test_mode::latency;
            else
              throw usage_error("--mode: '" + v + "' is not bw or lat");
          },
          "bw: bandwidth and message rate; lat: ping-pong latency (default bw)")
      ->type_name("bw|lat");
  auto* size = client->add_option_function<std::string>(
      "--size",
      [&s](const std::string& v) { s.sizes = {parse_number("--size", v, 1, 1u << 30, true)}; },
      "message size (k/m/g suffixes; default 64k)");
  size->type_name("BYTES");
  auto* sizes = client->add_option_function<std::string>(
      "--sizes", [&s](const std::string& v) { s.sizes = parse_sizes("--sizes", v); },
      "a sweep of sizes");
  sizes->type_name("A,B,...");
  auto* all = client->add_flag_callback(
      "--all",
      [&s] {
        s.sizes.clear();
        for (std::size_t n = 2; n <= (8u << 20); n *= 2)
          s.sizes.push_back(n);
      },
      "sweep 2 bytes .. 8 MiB in powers of two");
  size->excludes(sizes)->excludes(all);
  sizes->excludes(all);
  client
      ->add_option_function<std::string>(
          "--duration",
          [&s](const std::string& v) { s.duration = parse_seconds("--duration", v, 0.01); },
          "measured time per size (default 2)")
      ->type_name("SECONDS");
  add_number(*client, "--iterations", s.iterations, 1, 1ull << 40,
             "measured operations per size instead of a duration", true)
      ->type_name("N");
  client
      ->add_option_function<std::string>(
          "--warmup", [&s](const std::string& v) { s.warmup = parse_seconds("--warmup", v, 0); },
          "unmeasured time before each size (default 0.5)")
      ->type_name("SECONDS");
  add_number(*client, "--depth", s.depth, 1, 8192,
             "operations in flight per connection (default 128)");
  add_number(*client, "--connections", s.connections, 1, 256, "parallel connections (default 1)");
  add_number(*client, "--coroutines", s.coroutines, 1, 8192,
             "coroutines per connection, one operation in flight each (default: depth; more "
             "than depth wait in the library)");
  add_number(*client, "--batch", s.batch, 1, 8192,
             "bandwidth: each coroutine issues its operations N at a time as one "
             "connection::async_batch (one post, one completion; default 1: one async "
             "operation each); send, write, write_imm or read");
  add_either(*client, "--lat-send", s.lat_post_send, "await", "post",
             "ping-pong latency (send, write, write_imm): await the request's completion, then "
             "the reply (default), or post the request and await only the reply (perftest's "
             "method)");
  add_either(*client, "--send-completion", s.acknowledged_sends, "post", "ack",
             "when the framework's copied sends complete, at both ends "
             "(connection_options::send_completion): when posted (the default) or when the "
             "peer acknowledged them");
  add_either(*client, "--send-from", s.copied_sends, "registered", "copied",
             "where the framework's sends (--op send) come from, at both ends: a registered "
             "region, zero-copy (async_send(local_buffer), the default), or plain memory that "
             "the library copies (async_send(asio::buffer(...)), a service's usual call)");
  client
      ->add_option_function<std::string>(
          "--completion",
          [&s](const std::string& v) {
            s.completion_given = true;
            if (v == "event")
              s.completion = completion_mode::event;
            else if (v == "busy")
              s.completion = completion_mode::busy;
            else if (v == "adaptive")
              s.completion = completion_mode::adaptive;
            else
              throw usage_error("--completion: '" + v + "' is not event, busy or adaptive");
          },
          "how completions are waited for (default event; busy with --raw-verbs)")
      ->type_name("event|busy|adaptive");
  client->add_flag("--bidirectional", s.bidirectional, "both sides send (send bandwidth)");
  client->add_flag("--rpc-bulk-handles", s.rpc_bulk_handles,
                   "--op rpc: echo through bulk handles (the reply RDMA-written into the "
                   "caller's exposed buffer) instead of a returned vector");
  client->add_flag("--rpc-registered", s.rpc_registered,
                   "--op rpc: each caller's request and reply buffers in memory it registered "
                   "once (call_options::request_memory, reply_memory; the reply buffer "
                   "exposed): a bulk call registers nothing on the client");
  client
      ->add_option_function<std::string>(
          "--stream-transfer",
          [&s](const std::string& v) {
            using m = settings::stream_transfer_mode;
            if (v == "automatic")
              s.stream_transfer = m::automatic;
            else if (v == "push")
              s.stream_transfer = m::push;
            else if (v == "shared")
              s.stream_transfer = m::shared;
            else
              throw usage_error("--stream-transfer: '" + v + "' is not automatic, push or shared");
          },
          "--op stream: how the client's writes reach the server (stream_options::transfer; "
          "default automatic: shared on SoftRoCE, push elsewhere)")
      ->type_name("automatic|push|shared");
  client->add_flag("--shared-queues", s.shared_queues,
                   "the client's connections share one completion queue and one shared receive "
                   "queue (asio_rdma::shared_queues)");
  client->add_flag("--siw-zero-copy", s.siw_zero_copy,
                   "on SoftiWARP, let the client's sends and writes of more than a page go "
                   "from its buffers without a copy, as perftest's do "
                   "(connection_options::siw_zero_copy; other devices ignore it)");
  client->add_flag("--statistics", s.statistics,
                   "after the run, print each connection's statistics (ibv_post_send calls, "
                   "work requests, signalled, inline) to stderr");
  add_number(*client, "--inline", s.inline_size, 0, 1024, "inline threshold (default 64)", true);
  add_number(*client, "--adaptive-spin", s.adaptive_spin_us, 1,
             test_parameters::max_adaptive_spin_us,
             "--completion adaptive: how long both ends keep polling after a completion "
             "before they wait for an event, in µs (connection_options::adaptive_spin; "
             "default the library's, 200)", true);
  client->add_flag("--asio-floor", s.asio_floor,
                   "with --raw-verbs --op send --mode lat, at both ends: each "
                   "step of the ping-pong awaited through Asio's use_awaitable, with no library "
                   "in between (what any Asio coroutine library pays at least)");
  client->add_option("--json", s.json_path, "also write the results and parameters as JSON")
      ->type_name("FILE");

  app.final_callback([&s] {
    if (s.raw_verbs && !s.completion_given)
      s.completion = completion_mode::busy; // perftest's technique
    if (auto problem = check(s); !problem.empty())
      throw usage_error(problem);
  });
}

settings parse_command_line(int argc, char** argv) {
  settings s;
  CLI::App app("", "rdma_bench");
  describe(app, s);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    s.role = "help";
  } catch (const CLI::ParseError& e) {
    throw usage_error(e.what());
  }
  return s;
}

std::string check(const settings& s) {
  if (is_atomic(s.op))
    for (auto size : s.sizes)
      if (size != 8)
        return std::string(name(s.op)) + " works on 8 bytes: use --size 8";
  if (s.bidirectional && (s.op != operation::send || s.mode != test_mode::bandwidth))
    return "--bidirectional applies to send bandwidth only";
  if (s.raw_verbs && s.bidirectional)
    return "--raw-verbs does not run --bidirectional";
  if (s.raw_verbs && s.connections != 1)
    return "--raw-verbs runs one connection";
  if (s.raw_verbs && s.statistics)
    return "--statistics applies to asio_rdma connections, not --raw-verbs";
  if (s.raw_verbs && s.siw_zero_copy)
    return "--siw-zero-copy applies to asio_rdma connections (--raw-verbs posts unsignalled "
           "requests, which siw sends without a copy anyway)";
  if (s.raw_verbs && s.shared_queues)
    return "--shared-queues applies to asio_rdma connections, not --raw-verbs";
  if (s.op == operation::ud_send && s.shared_queues)
    return "--shared-queues applies to connections, not ud_send";
  if (s.raw_verbs && s.completion == completion_mode::adaptive)
    return "--raw-verbs supports --completion busy or event";
  if (s.adaptive_spin_us != 0 && s.completion != completion_mode::adaptive)
    return "--adaptive-spin applies to --completion adaptive";
  if (s.adaptive_spin_us != 0 && s.op == operation::ud_send)
    return "--adaptive-spin applies to connections, streams and rpc, not ud_send";
  if (s.op == operation::ud_send && s.raw_verbs)
    return "--raw-verbs does not run ud_send (datagrams run on asio_rdma only)";
  if (s.op == operation::ud_send && s.connections != 1)
    return "ud_send runs one datagram socket: drop --connections";
  if ((s.op == operation::stream || s.op == operation::rpc) &&
      (s.raw_verbs || s.connections != 1 || s.shared_queues || s.batch > 1 || s.coroutines))
    return "stream and rpc run one asio_rdma::stream: drop --raw-verbs, --connections, "
           "--shared-queues, --batch and --coroutines";
  if (s.mode == test_mode::latency && s.connections != 1)
    return "latency runs one connection";
  const bool ping_pong_op =
      s.op == operation::send || s.op == operation::write || s.op == operation::write_imm;
  if (s.lat_post_send && (s.raw_verbs || s.mode != test_mode::latency || !ping_pong_op))
    return "--lat-send post applies to the ping-pong latency (send, write, write_imm) on "
           "asio_rdma";
  if (s.acknowledged_sends && s.raw_verbs)
    return "--send-completion applies to asio_rdma connections";
  if (s.copied_sends && (s.raw_verbs || s.op != operation::send))
    return "--send-from applies to --op send on asio_rdma connections";
  if (s.copied_sends && s.batch > 1)
    return "--send-from copied sends one message per operation: drop --batch";
  if (s.asio_floor &&
      (!s.raw_verbs || s.op != operation::send || s.mode != test_mode::latency))
    return "--asio-floor applies to --raw-verbs --op send --mode lat";
  if (s.batch > 1) {
    if (s.raw_verbs)
      return "--batch applies to asio_rdma connections (--raw-verbs posts lists of its own)";
    if (s.mode != test_mode::bandwidth || s.bidirectional)
      return "--batch applies to bandwidth, not latency or --bidirectional";
    if (is_atomic(s.op) || s.op == operation::ud_send)
      return "--batch runs send, write, write_imm or read";
    if (s.batch > s.depth)
      return "--batch may not exceed --depth (a batch fits the send queue)";
    if (s.coroutines)
      return "--batch sets the coroutines itself (depth / batch): drop --coroutines";
  }
  return {};
}

} // namespace rdma_bench
