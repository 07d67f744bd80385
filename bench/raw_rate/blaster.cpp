#include "blaster.hpp"

#include "namespaces.hpp"

#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace raw_rate {

blast_result blast(const std::string& ns, const std::string& interface,
                   const asio_rdma::mac_address& destination, std::uint16_t port,
                   std::size_t payload, const std::atomic<bool>& stop) {
  int fd;
  unsigned index;
  {
    enter_namespace in(ns);
    fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    index = ::if_nametoindex(interface.c_str());
  }
  if (fd < 0 || index == 0)
    throw std::runtime_error("blaster: cannot open a packet socket on " + interface);
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_IP);
  address.sll_ifindex = static_cast<int>(index);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    throw std::runtime_error("blaster: bind failed");

  // One Ethernet/IPv4/UDP frame, sent over and over (checksums are not checked on the way).
  std::vector<std::uint8_t> frame(14 + 20 + 8 + payload, 0);
  std::memcpy(frame.data(), destination.bytes.data(), 6);
  const std::uint8_t source[6] = {0x02, 0, 0, 0, 0, 0x01};
  std::memcpy(frame.data() + 6, source, 6);
  frame[12] = 0x08;
  frame[14] = 0x45;
  const auto ip_length = static_cast<std::uint16_t>(20 + 8 + payload);
  frame[16] = static_cast<std::uint8_t>(ip_length >> 8);
  frame[17] = static_cast<std::uint8_t>(ip_length);
  frame[22] = 64;
  frame[23] = 17;
  const std::uint8_t ips[8] = {192, 0, 2, 1, 192, 0, 2, 2};
  std::memcpy(frame.data() + 26, ips, 8);
  frame[34] = 0x30;
  frame[35] = 0x39;
  frame[36] = static_cast<std::uint8_t>(port >> 8);
  frame[37] = static_cast<std::uint8_t>(port);
  frame[38] = static_cast<std::uint8_t>((8 + payload) >> 8);
  frame[39] = static_cast<std::uint8_t>(8 + payload);

  constexpr unsigned batch = 64;
  iovec vector{frame.data(), frame.size()};
  std::vector<mmsghdr> messages(batch);
  for (auto& m : messages) {
    m.msg_hdr.msg_iov = &vector;
    m.msg_hdr.msg_iovlen = 1;
  }
  blast_result result;
  while (!stop.load(std::memory_order_relaxed)) {
    const int n = ::sendmmsg(fd, messages.data(), batch, 0);
    if (n > 0)
      result.sent += static_cast<unsigned>(n);
    else if (errno == ENOBUFS)
      ++result.dropped;
    else if (errno != EINTR && errno != EAGAIN)
      break;
  }
  ::close(fd);
  return result;
}

} // namespace raw_rate
