// Building Ethernet / 802.1Q / IPv4 / UDP / TCP frames for the tests. Test-only.
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace raw_test {

struct frame_spec {
  asio_rdma::mac_address destination{{0x02, 0, 0, 0, 0, 0xbb}};
  asio_rdma::mac_address source{{0x02, 0, 0, 0, 0, 0xaa}};
  std::optional<std::uint16_t> vlan_tci;       // outer 802.1Q tag
  std::optional<std::uint16_t> inner_vlan_tci; // a second tag (QinQ-style, both 0x8100)
  std::uint16_t ethertype = asio_rdma::ethertype::ipv4;
  // IPv4 (when ethertype is 0x0800)
  std::uint32_t ip_source = 0xc0000201; // 192.0.2.1
  std::uint32_t ip_destination = 0xc0000202;
  std::uint8_t protocol = 17;
  std::uint8_t ip_header_words = 5;
  std::uint16_t fragment = 0; // flags + offset field (0x2000 = MF, low 13 bits = offset)
  std::uint16_t source_port = 1234;
  std::uint16_t destination_port = 5000;
  std::size_t payload = 18;
  std::uint32_t sequence = 0; // written at the start of the payload
};

inline void put16(std::vector<std::uint8_t>& f, std::uint16_t v) {
  f.push_back(static_cast<std::uint8_t>(v >> 8));
  f.push_back(static_cast<std::uint8_t>(v));
}
inline void put32(std::vector<std::uint8_t>& f, std::uint32_t v) {
  put16(f, static_cast<std::uint16_t>(v >> 16));
  put16(f, static_cast<std::uint16_t>(v));
}
inline std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

/// A wire frame (tags in the data) as described by `s`.
inline std::vector<std::uint8_t> build_frame(const frame_spec& s) {
  std::vector<std::uint8_t> f;
  f.insert(f.end(), s.destination.bytes.begin(), s.destination.bytes.end());
  f.insert(f.end(), s.source.bytes.begin(), s.source.bytes.end());
  if (s.vlan_tci) {
    put16(f, 0x8100);
    put16(f, *s.vlan_tci);
  }
  if (s.inner_vlan_tci) {
    put16(f, 0x8100);
    put16(f, *s.inner_vlan_tci);
  }
  put16(f, s.ethertype);
  if (s.ethertype != asio_rdma::ethertype::ipv4) {
    for (std::size_t i = 0; i < 46; ++i)
      f.push_back(static_cast<std::uint8_t>(i));
    return f;
  }
  const std::size_t ip_start = f.size();
  const std::size_t l4_length = (s.protocol == 6 ? 20 : s.protocol == 17 ? 8 : 4) + s.payload;
  const std::size_t ip_length = s.ip_header_words * 4u + l4_length;
  f.push_back(static_cast<std::uint8_t>(0x40 | s.ip_header_words));
  f.push_back(0);
  put16(f, static_cast<std::uint16_t>(ip_length));
  put16(f, 0x1234);
  put16(f, s.fragment);
  f.push_back(64);
  f.push_back(s.protocol);
  put16(f, 0); // checksum, below
  put32(f, s.ip_source);
  put32(f, s.ip_destination);
  for (int i = 5; i < s.ip_header_words; ++i)
    put32(f, 0x01010101); // NOP options
  std::uint32_t sum = 0;
  for (std::size_t i = ip_start; i < ip_start + s.ip_header_words * 4u; i += 2)
    sum += get16(&f[i]);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  f[ip_start + 10] = static_cast<std::uint8_t>(~sum >> 8);
  f[ip_start + 11] = static_cast<std::uint8_t>(~sum);
  if (s.protocol == 17 || s.protocol == 6) {
    put16(f, s.source_port);
    put16(f, s.destination_port);
  }
  if (s.protocol == 17) {
    put16(f, static_cast<std::uint16_t>(l4_length));
    put16(f, 0);
  } else if (s.protocol == 6) {
    put32(f, 1);
    put32(f, 0);
    put16(f, 0x5002);
    put16(f, 0xffff);
    put32(f, 0);
  } else {
    put32(f, 0x08000000); // ICMP echo-ish
  }
  put32(f, s.sequence);
  for (std::size_t i = 4; i < s.payload; ++i)
    f.push_back(static_cast<std::uint8_t>(i));
  return f;
}

} // namespace raw_test
