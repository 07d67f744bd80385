// Addresses as a UD socket needs them: GIDs and IP addresses, sockaddrs for
// rdma_cm, and the constants of rdma_cm's UDP port space.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/ip/address.hpp>

#include <rdma/rdma_cma.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace asio_rdma::detail {

// Every UD receive buffer starts with 40 bytes for the GRH. On RoCE v2 over
// IPv4 the first 20 are unused and the IPv4 header fills the last 20.
constexpr std::uint32_t grh_bytes = 40;
// rdma_cm's queue key for RDMA_PS_UDP (its QPs are created with it).
constexpr std::uint32_t udp_qkey = 0x01234567;

/// The GID of an address: IPv6 as is, IPv4 mapped (::ffff:a.b.c.d).
std::array<std::uint8_t, 16> mapped_gid(const boost::asio::ip::address& a);
/// The address of a GID (IPv4 again when it is a mapped one).
boost::asio::ip::address address_of(const std::array<std::uint8_t, 16>& gid);
boost::asio::ip::address address_of(const sockaddr* sa);
/// sockaddr for rdma_cm from a numeric address and port.
bool make_sockaddr(std::string_view text, std::uint16_t port, sockaddr_storage& out);
/// `bound` with port 0: for ids that must sit on the socket's device.
sockaddr_storage ephemeral(const sockaddr* bound);
/// The error an rdma_cm event's status stands for.
error_code from_event_status(int status);

} // namespace asio_rdma::detail
