#include "options.hpp"

#include "cli.hpp"

#include <cmath>
#include <stdexcept>

namespace rdma_bench {

using asio_rdma::cli::parse_number;
using asio_rdma::cli::usage_error;

const char* const usage =
    "usage: rdma_bench server [--bind ADDR] [--port 7472] [--raw-verbs]\n"
    "       rdma_bench client HOST [options]\n"
    "client options:\n"
    "  --op send|write|write_imm|read|fetch_add|compare_swap   (default send)\n"
    "  --mode bw|lat          bandwidth/message rate, or ping-pong latency (default bw)\n"
    "  --size BYTES           message size (k/m/g suffixes; default 64k)\n"
    "  --sizes A,B,...        a sweep of sizes\n"
    "  --all                  sweep 2 bytes .. 8 MiB in powers of two\n"
    "  --duration SECONDS     measured time per size (default 2)\n"
    "  --iterations N         measured operations per size instead of a duration\n"
    "  --warmup SECONDS       unmeasured time before each size (default 0.5)\n"
    "  --depth N              operations in flight per connection (default 128)\n"
    "  --connections N        parallel connections (default 1)\n"
    "  --coroutines N         coroutines per connection, one operation in flight each\n"
    "                         (default: depth; more than depth wait in the library)\n"
    "  --completion event|busy|adaptive   how completions are waited for (default event)\n"
    "  --bidirectional        both sides send (send bandwidth)\n"
    "  --inline BYTES         inline threshold (default 64)\n"
    "  --json FILE            also write the results and parameters as JSON\n"
    "  --raw-verbs            baseline on plain ibverbs/rdmacm (needs 'server --raw-verbs')\n"
    "  --port P, --quiet, --help\n";

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
                  operation::fetch_add, operation::compare_swap})
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

settings parse_command_line(int argc, char** argv) {
  asio_rdma::cli::arguments args(argc, argv);
  settings s;
  if (args.done())
    throw usage_error("missing role (server or client)");
  s.role = args.next();
  if (s.role == "--help" || s.role == "-h") {
    s.role = "help";
    return s;
  }
  if (s.role != "server" && s.role != "client")
    throw usage_error("unknown role '" + s.role + "' (server or client)");
  const bool client = s.role == "client";
  bool have_host = false;
  while (!args.done()) {
    auto arg = args.next();
    if (arg == "--help" || arg == "-h") {
      s.role = "help";
      return s;
    } else if (arg == "--port")
      s.port = static_cast<std::uint16_t>(parse_number(arg, args.value(arg), 1, 65535));
    else if (arg == "--raw-verbs")
      s.raw_verbs = true;
    else if (arg == "--quiet")
      s.quiet = true;
    else if (arg == "--bind" && !client)
      s.host = args.value(arg);
    else if (!client)
      throw usage_error("unexpected server argument '" + std::string(arg) + "'");
    else if (arg == "--op")
      s.op = parse_operation(args.value(arg));
    else if (arg == "--mode") {
      auto v = args.value(arg);
      if (v == "bw" || v == "bandwidth")
        s.mode = test_mode::bandwidth;
      else if (v == "lat" || v == "latency")
        s.mode = test_mode::latency;
      else
        throw usage_error("--mode: '" + std::string(v) + "' is not bw or lat");
    } else if (arg == "--size")
      s.sizes = {parse_number(arg, args.value(arg), 1, 1u << 30, true)};
    else if (arg == "--sizes")
      s.sizes = parse_sizes(arg, args.value(arg));
    else if (arg == "--all") {
      s.sizes.clear();
      for (std::size_t size = 2; size <= (8u << 20); size *= 2)
        s.sizes.push_back(size);
    } else if (arg == "--duration")
      s.duration = parse_seconds(arg, args.value(arg), 0.01);
    else if (arg == "--iterations")
      s.iterations = parse_number(arg, args.value(arg), 1, 1ull << 40, true);
    else if (arg == "--warmup")
      s.warmup = parse_seconds(arg, args.value(arg), 0);
    else if (arg == "--depth")
      s.depth = static_cast<std::uint32_t>(parse_number(arg, args.value(arg), 1, 8192));
    else if (arg == "--connections")
      s.connections = static_cast<std::uint32_t>(parse_number(arg, args.value(arg), 1, 256));
    else if (arg == "--coroutines")
      s.coroutines = static_cast<std::uint32_t>(parse_number(arg, args.value(arg), 1, 8192));
    else if (arg == "--completion") {
      auto v = args.value(arg);
      s.completion_given = true;
      if (v == "event")
        s.completion = completion_mode::event;
      else if (v == "busy")
        s.completion = completion_mode::busy;
      else if (v == "adaptive")
        s.completion = completion_mode::adaptive;
      else
        throw usage_error("--completion: '" + std::string(v) + "' is not event, busy or adaptive");
    } else if (arg == "--bidirectional")
      s.bidirectional = true;
    else if (arg == "--inline")
      s.inline_size = static_cast<std::uint32_t>(parse_number(arg, args.value(arg), 0, 1024));
    else if (arg == "--json")
      s.json_path = args.value(arg);
    else if (!arg.starts_with("-") && !have_host) {
      s.host = arg;
      have_host = true;
    } else
      throw usage_error("unexpected argument '" + std::string(arg) + "'");
  }
  if (client && !have_host)
    throw usage_error("client needs a HOST");
  if (s.raw_verbs && !s.completion_given)
    s.completion = completion_mode::busy; // perftest's technique
  if (auto problem = check(s); !problem.empty())
    throw usage_error(problem);
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
  if (s.raw_verbs && s.completion == completion_mode::adaptive)
    return "--raw-verbs supports --completion busy or event";
  if (s.mode == test_mode::latency && s.connections != 1)
    return "latency runs one connection";
  return {};
}

} // namespace rdma_bench
