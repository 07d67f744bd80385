// The few frames raw_ping reads and writes: Ethernet + ARP, Ethernet + IPv4 + ICMP echo.
// Untagged frames only.
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace raw_ping {

using address = boost::asio::ip::address_v4;
using asio_rdma::mac_address;

struct arp_message {
  std::uint16_t operation = 0; // 1 request, 2 reply
  mac_address sender_mac, target_mac;
  address sender_ip, target_ip;
};

/// Parses an Ethernet/IPv4 ARP frame.
std::optional<arp_message> parse_arp(std::span<const std::byte> frame);
/// Writes an ARP frame (Ethernet destination `to`, source arp.sender_mac); returns its length.
std::size_t write_arp(std::span<std::byte> out, const mac_address& to, const arp_message& arp);

struct echo_message {
  mac_address source_mac;
  address source_ip, destination_ip;
  std::uint8_t type = 0; // 8 request, 0 reply
  std::uint8_t ttl = 0;
  std::uint16_t identifier = 0, sequence = 0;
  std::size_t icmp_length = 0; // ICMP header + data
};

/// Parses an Ethernet/IPv4/ICMP echo request or reply (checksums verified).
std::optional<echo_message> parse_echo(std::span<const std::byte> frame);

/// Turns the echo request in `request` into its reply in `out` (addresses swapped, our MAC as
/// source); returns the reply's length, 0 when it does not fit.
std::size_t write_echo_reply(std::span<std::byte> out, std::span<const std::byte> request,
                             const mac_address& our_mac);

/// Writes an echo request with `data_length` bytes of data; returns the frame's length.
std::size_t write_echo_request(std::span<std::byte> out, const mac_address& from_mac,
                               const mac_address& to_mac, address from, address to,
                               std::uint16_t identifier, std::uint16_t sequence,
                               std::size_t data_length);

} // namespace raw_ping
