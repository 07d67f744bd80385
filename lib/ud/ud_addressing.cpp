#include "ud/ud_addressing.hpp"

#include "verbs/verbs_error.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace asio_rdma::detail {

std::array<std::uint8_t, 16> mapped_gid(const boost::asio::ip::address& a) {
  std::array<std::uint8_t, 16> gid{};
  if (a.is_v4()) {
    gid[10] = gid[11] = 0xff;
    const auto b = a.to_v4().to_bytes();
    std::memcpy(gid.data() + 12, b.data(), 4);
  } else {
    const auto b = a.to_v6().to_bytes();
    std::memcpy(gid.data(), b.data(), 16);
  }
  return gid;
}

boost::asio::ip::address address_of(const std::array<std::uint8_t, 16>& gid) {
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), gid.data(), 16);
  boost::asio::ip::address_v6 v6(b);
  if (v6.is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6);
  return v6;
}

boost::asio::ip::address address_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return boost::asio::ip::address_v4(ntohl(in->sin_addr.s_addr));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  boost::asio::ip::address_v6::bytes_type b;
  std::memcpy(b.data(), &in6->sin6_addr, 16);
  return boost::asio::ip::address_v6(b);
}

bool make_sockaddr(std::string_view text, std::uint16_t port, sockaddr_storage& out) {
  error_code ec;
  const auto a = boost::asio::ip::make_address(std::string(text), ec);
  if (ec)
    return false;
  out = {};
  if (a.is_v4()) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(a.to_v4().to_uint());
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    const auto b = a.to_v6().to_bytes();
    std::memcpy(&in6->sin6_addr, b.data(), 16);
    in6->sin6_scope_id = a.to_v6().scope_id();
  }
  return true;
}

sockaddr_storage ephemeral(const sockaddr* bound) {
  sockaddr_storage src{};
  std::memcpy(&src, bound,
              bound->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  if (src.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;
  else
    reinterpret_cast<sockaddr_in6*>(&src)->sin6_port = 0;
  return src;
}

error_code from_event_status(int status) {
  if (status < 0)
    return error_code(-status, boost::system::system_category());
  return errc::unreachable;
}

} // namespace asio_rdma::detail
