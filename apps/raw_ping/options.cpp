#include "options.hpp"

#include "cli.hpp"

#include <cstdlib>
#include <string_view>

namespace raw_ping {

namespace {

using asio_rdma::cli::usage_error;

std::chrono::milliseconds parse_seconds(const std::string& option, const std::string& s) {
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(value >= 0.001) || value > 3600)
    throw usage_error(option + ": not a time in seconds (0.001..3600): " + s);
  return std::chrono::milliseconds(static_cast<long long>(value * 1000 + 0.5));
}

/// Runs a parser of the library that throws system_error as a usage error.
template <typename Parse> auto checked(const std::string& option, Parse parse) {
  try {
    return parse();
  } catch (const std::exception& e) {
    throw usage_error(option + ": " + e.what());
  }
}

} // namespace

void describe(CLI::App& app, options& o) {
  app.description("ARP and ICMP echo over a raw socket only (the interface needs no address)");
  app.require_subcommand(1);
  auto* responder = app.add_subcommand("responder", "answer ARP and ICMP echo requests for --ip");
  auto* request = app.add_subcommand("request", "resolve --to with ARP and ping it");
  responder->callback([&o] { o.mode = options::mode_type::responder; });
  request->callback([&o] { o.mode = options::mode_type::request; });
  for (auto* sub : {responder, request}) {
    sub->add_option("--interface", o.interface, "the network interface")
        ->required()
        ->type_name("IF");
    sub->add_option_function<std::string>(
           "--ip",
           [&o](const std::string& v) {
             o.ip = checked("--ip", [&] { return asio_rdma::parse_ipv4_address(v); });
           },
           "our IPv4 address")
        ->required()
        ->type_name("A");
    sub->add_option_function<std::string>(
           "--mac",
           [&o](const std::string& v) {
             o.mac = checked("--mac", [&] { return asio_rdma::parse_mac_address(v); });
           },
           "our MAC address (default: the interface's)")
        ->type_name("M");
    asio_rdma::cli::add_number(*sub, "--count", o.count, 0, 999999999,
                               "requests to send / replies to give, then exit (0: until SIGINT)");
    sub->add_option("--backend", o.backend, "raw socket backend (default automatic)")
        ->check(CLI::IsMember({"automatic", "verbs", "packet"}))
        ->type_name("BACKEND");
  }
  request
      ->add_option_function<std::string>(
          "--to",
          [&o](const std::string& v) {
            o.to = checked("--to", [&] { return asio_rdma::parse_ipv4_address(v); });
          },
          "the address to ping")
      ->required()
      ->type_name("DST");
  request
      ->add_option_function<std::string>(
          "--interval", [&o](const std::string& v) { o.interval = parse_seconds("--interval", v); },
          "between echo requests (default 1)")
      ->type_name("SECONDS");
  request
      ->add_option_function<std::string>(
          "--timeout", [&o](const std::string& v) { o.timeout = parse_seconds("--timeout", v); },
          "per ARP try and echo reply (default 1)")
      ->type_name("SECONDS");
}

} // namespace raw_ping
