#include "options.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace raw_ping {

const char* usage() {
  return "usage: raw_ping responder --interface IF --ip A [--mac M] [--count N] [--backend B]\n"
         "       raw_ping request --interface IF --ip SRC --to DST [--mac M] [--count N]\n"
         "                        [--interval SECONDS] [--timeout SECONDS] [--backend B]\n"
         "Answers (responder) or sends (request) ARP and ICMP echo using only a raw socket;\n"
         "the interface needs no address. B: automatic (default), verbs or packet.\n";
}

namespace {

unsigned parse_count(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos ||
      text.size() > 9)
    throw std::invalid_argument("not a count: " + std::string(text));
  return static_cast<unsigned>(std::stoul(std::string(text)));
}

std::chrono::milliseconds parse_seconds(std::string_view text) {
  char* end = nullptr;
  const std::string s(text);
  const double value = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(value >= 0.001) || value > 3600)
    throw std::invalid_argument("not a time in seconds (0.001..3600): " + s);
  return std::chrono::milliseconds(static_cast<long long>(value * 1000 + 0.5));
}

} // namespace

options parse_options(int argc, char** argv) {
  if (argc < 2)
    throw std::invalid_argument("missing mode");
  options o;
  const std::string_view mode = argv[1];
  if (mode == "responder")
    o.mode = options::mode_type::responder;
  else if (mode == "request")
    o.mode = options::mode_type::request;
  else
    throw std::invalid_argument("unknown mode: " + std::string(mode));
  bool have_ip = false, have_to = false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc)
      throw std::invalid_argument("missing value after " + std::string(flag));
    const std::string_view value = argv[++i];
    if (flag == "--interface") {
      o.interface = value;
    } else if (flag == "--ip") {
      o.ip = asio_rdma::parse_ipv4_address(value);
      have_ip = true;
    } else if (flag == "--to") {
      o.to = asio_rdma::parse_ipv4_address(value);
      have_to = true;
    } else if (flag == "--mac") {
      o.mac = asio_rdma::parse_mac_address(value);
    } else if (flag == "--count") {
      o.count = parse_count(value);
    } else if (flag == "--interval") {
      o.interval = parse_seconds(value);
    } else if (flag == "--timeout") {
      o.timeout = parse_seconds(value);
    } else if (flag == "--backend") {
      if (value != "automatic" && value != "verbs" && value != "packet")
        throw std::invalid_argument("unknown backend: " + std::string(value));
      o.backend = value;
    } else {
      throw std::invalid_argument("unknown option: " + std::string(flag));
    }
  }
  if (o.interface.empty())
    throw std::invalid_argument("--interface is required");
  if (!have_ip)
    throw std::invalid_argument("--ip is required");
  if (o.mode == options::mode_type::request && !have_to)
    throw std::invalid_argument("--to is required for request");
  return o;
}

} // namespace raw_ping
