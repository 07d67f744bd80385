// Fuzzes the conversions between rdma_cm's socket addresses and Asio
// endpoints (lib/cm/endpoint.cpp), fed with what async_connect and the acceptor
// parse from a user's host text, and with raw sockaddr bytes as rdma_cm
// reports a peer's and our own address. Invariants: an endpoint converts to a
// sockaddr and back unchanged; a sockaddr of any other family, or none, gives
// the default endpoint; nothing reads past a sockaddr_storage.
#include "fuzz_check.hpp"

#include "cm/endpoint.hpp"

#include <boost/asio/ip/address.hpp>

#include <cstring>
#include <netinet/in.h>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace asio = boost::asio;
  using asio_rdma::detail::to_endpoint;
  using asio_rdma::detail::to_sockaddr;

  // Host text, as connection_impl::start_connect and the acceptor parse it.
  if (size >= 2) {
    const std::uint16_t port = static_cast<std::uint16_t>(data[0] << 8 | data[1]);
    const std::string host(reinterpret_cast<const char*>(data) + 2, size - 2);
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (!ec) {
      const asio::ip::tcp::endpoint ep(address, port);
      sockaddr_storage storage;
      std::memset(&storage, 0xa5, sizeof storage);
      to_sockaddr(ep, storage);
      FUZZ_CHECK(to_endpoint(reinterpret_cast<const sockaddr*>(&storage)) == ep);
    }
  }

  // Raw bytes as a sockaddr from rdma_cm.
  sockaddr_storage raw{};
  std::memcpy(&raw, data, std::min(size, sizeof raw));
  const auto* sa = reinterpret_cast<const sockaddr*>(&raw);
  const auto ep = to_endpoint(sa);
  if (sa->sa_family == AF_INET) {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(&raw);
    FUZZ_CHECK(ep.address().is_v4() && ep.port() == ntohs(in4->sin_port));
    FUZZ_CHECK(ep.address().to_v4().to_uint() == ntohl(in4->sin_addr.s_addr));
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&raw);
    FUZZ_CHECK(ep.address().is_v6() && ep.port() == ntohs(in6->sin6_port));
    const auto bytes = ep.address().to_v6().to_bytes();
    FUZZ_CHECK(std::memcmp(bytes.data(), &in6->sin6_addr, 16) == 0);
    FUZZ_CHECK(ep.address().to_v6().scope_id() == in6->sin6_scope_id);
  } else {
    FUZZ_CHECK(ep == asio::ip::tcp::endpoint());
  }
  FUZZ_CHECK(to_endpoint(nullptr) == asio::ip::tcp::endpoint());
  return 0;
}
