// raw_ping's command line.
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <CLI/App.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace raw_ping {

struct options {
  enum class mode_type { responder, request } mode = mode_type::responder;
  std::string interface;
  boost::asio::ip::address_v4 ip;            // our address (--ip)
  std::optional<asio_rdma::mac_address> mac; // our MAC (--mac; default: the interface's)
  boost::asio::ip::address_v4 to;            // request: the peer (--to)
  unsigned count = 0;                        // request: echo requests (0: until SIGINT);
                                             // responder: exit after this many replies
  std::chrono::milliseconds interval{1000};  // request: between echo requests
  std::chrono::milliseconds timeout{1000};   // request: per ARP try / echo reply
  std::string backend = "automatic";
};

/// Declares the subcommands (responder, request) and their options in `app`
/// (CLI11); parsing fills `o`.
void describe(CLI::App& app, options& o);

} // namespace raw_ping
