#include "frames.hpp"

#include <algorithm>
#include <cstring>

namespace raw_ping {
namespace {

constexpr std::size_t ethernet_header = 14;

std::uint16_t get16(std::span<const std::byte> f, std::size_t at) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(f[at]) << 8 |
                                    std::to_integer<unsigned>(f[at + 1]));
}
std::uint32_t get32(std::span<const std::byte> f, std::size_t at) {
  return std::uint32_t{get16(f, at)} << 16 | get16(f, at + 2);
}
void put16(std::span<std::byte> f, std::size_t at, std::uint16_t v) {
  f[at] = std::byte(v >> 8);
  f[at + 1] = std::byte(v & 0xff);
}
void put32(std::span<std::byte> f, std::size_t at, std::uint32_t v) {
  put16(f, at, static_cast<std::uint16_t>(v >> 16));
  put16(f, at + 2, static_cast<std::uint16_t>(v));
}
mac_address get_mac(std::span<const std::byte> f, std::size_t at) {
  mac_address m;
  for (std::size_t i = 0; i < 6; ++i)
    m.bytes[i] = std::to_integer<std::uint8_t>(f[at + i]);
  return m;
}
void put_mac(std::span<std::byte> f, std::size_t at, const mac_address& m) {
  for (std::size_t i = 0; i < 6; ++i)
    f[at + i] = std::byte(m.bytes[i]);
}

// The Internet checksum of f[at, at + length).
std::uint16_t checksum(std::span<const std::byte> f, std::size_t at, std::size_t length) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < length; i += 2)
    sum += get16(f, at + i);
  if (length % 2)
    sum += std::to_integer<unsigned>(f[at + length - 1]) << 8;
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

void write_ip_header(std::span<std::byte> f, std::size_t total_length, address from, address to) {
  const std::size_t ip = ethernet_header;
  f[ip] = std::byte{0x45};
  f[ip + 1] = std::byte{0};
  put16(f, ip + 2, static_cast<std::uint16_t>(total_length));
  put16(f, ip + 4, 0);      // identification
  put16(f, ip + 6, 0x4000); // don't fragment
  f[ip + 8] = std::byte{64};
  f[ip + 9] = std::byte{1}; // ICMP
  put16(f, ip + 10, 0);
  put32(f, ip + 12, from.to_uint());
  put32(f, ip + 16, to.to_uint());
  put16(f, ip + 10, checksum(f, ip, 20));
}

} // namespace

std::optional<arp_message> parse_arp(std::span<const std::byte> f) {
  if (f.size() < ethernet_header + 28 || get16(f, 12) != asio_rdma::ethertype::arp)
    return std::nullopt;
  const std::size_t a = ethernet_header;
  if (get16(f, a) != 1 || get16(f, a + 2) != asio_rdma::ethertype::ipv4 ||
      std::to_integer<unsigned>(f[a + 4]) != 6 || std::to_integer<unsigned>(f[a + 5]) != 4)
    return std::nullopt;
  arp_message m;
  m.operation = get16(f, a + 6);
  m.sender_mac = get_mac(f, a + 8);
  m.sender_ip = address(get32(f, a + 14));
  m.target_mac = get_mac(f, a + 18);
  m.target_ip = address(get32(f, a + 24));
  return m;
}

std::size_t write_arp(std::span<std::byte> f, const mac_address& to, const arp_message& m) {
  const std::size_t length = 60; // minimum Ethernet frame without FCS
  std::fill(f.begin(), f.begin() + length, std::byte{0});
  put_mac(f, 0, to);
  put_mac(f, 6, m.sender_mac);
  put16(f, 12, asio_rdma::ethertype::arp);
  const std::size_t a = ethernet_header;
  put16(f, a, 1);
  put16(f, a + 2, asio_rdma::ethertype::ipv4);
  f[a + 4] = std::byte{6};
  f[a + 5] = std::byte{4};
  put16(f, a + 6, m.operation);
  put_mac(f, a + 8, m.sender_mac);
  put32(f, a + 14, m.sender_ip.to_uint());
  put_mac(f, a + 18, m.target_mac);
  put32(f, a + 24, m.target_ip.to_uint());
  return length;
}

std::optional<echo_message> parse_echo(std::span<const std::byte> f) {
  const std::size_t ip = ethernet_header;
  if (f.size() < ip + 20 + 8 || get16(f, 12) != asio_rdma::ethertype::ipv4)
    return std::nullopt;
  const std::size_t header = 4u * (std::to_integer<unsigned>(f[ip]) & 0x0f);
  const std::size_t total = get16(f, ip + 2);
  if ((std::to_integer<unsigned>(f[ip]) >> 4) != 4 || header < 20 || total < header + 8 ||
      ip + total > f.size() || std::to_integer<unsigned>(f[ip + 9]) != 1 ||
      (get16(f, ip + 6) & 0x3fff) != 0 || checksum(f, ip, header) != 0)
    return std::nullopt;
  const std::size_t icmp = ip + header;
  const auto type = std::to_integer<std::uint8_t>(f[icmp]);
  if ((type != 8 && type != 0) || f[icmp + 1] != std::byte{0} ||
      checksum(f, icmp, total - header) != 0)
    return std::nullopt;
  echo_message m;
  m.source_mac = get_mac(f, 6);
  m.source_ip = address(get32(f, ip + 12));
  m.destination_ip = address(get32(f, ip + 16));
  m.type = type;
  m.ttl = std::to_integer<std::uint8_t>(f[ip + 8]);
  m.identifier = get16(f, icmp + 4);
  m.sequence = get16(f, icmp + 6);
  m.icmp_length = total - header;
  return m;
}

std::size_t write_echo_reply(std::span<std::byte> out, std::span<const std::byte> request,
                             const mac_address& our_mac) {
  const auto m = parse_echo(request);
  if (!m || m->type != 8)
    return 0;
  const std::size_t length = ethernet_header + 20 + m->icmp_length;
  if (length > out.size())
    return 0;
  const std::size_t request_icmp =
      ethernet_header + 4u * (std::to_integer<unsigned>(request[14]) & 0x0f);
  put_mac(out, 0, m->source_mac);
  put_mac(out, 6, our_mac);
  put16(out, 12, asio_rdma::ethertype::ipv4);
  write_ip_header(out, 20 + m->icmp_length, m->destination_ip, m->source_ip);
  const std::size_t icmp = ethernet_header + 20;
  std::memcpy(out.data() + icmp, request.data() + request_icmp, m->icmp_length);
  out[icmp] = std::byte{0}; // echo reply
  put16(out, icmp + 2, 0);
  put16(out, icmp + 2, checksum(out, icmp, m->icmp_length));
  return length;
}

std::size_t write_echo_request(std::span<std::byte> out, const mac_address& from_mac,
                               const mac_address& to_mac, address from, address to,
                               std::uint16_t identifier, std::uint16_t sequence,
                               std::size_t data_length) {
  const std::size_t icmp_length = 8 + data_length;
  put_mac(out, 0, to_mac);
  put_mac(out, 6, from_mac);
  put16(out, 12, asio_rdma::ethertype::ipv4);
  write_ip_header(out, 20 + icmp_length, from, to);
  const std::size_t icmp = ethernet_header + 20;
  out[icmp] = std::byte{8};
  out[icmp + 1] = std::byte{0};
  put16(out, icmp + 2, 0);
  put16(out, icmp + 4, identifier);
  put16(out, icmp + 6, sequence);
  for (std::size_t i = 0; i < data_length; ++i)
    out[icmp + 8 + i] = std::byte(i & 0xff);
  put16(out, icmp + 2, checksum(out, icmp, icmp_length));
  return ethernet_header + 20 + icmp_length;
}

} // namespace raw_ping
