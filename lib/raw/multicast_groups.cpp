#include "raw/multicast_groups.hpp"

#include "verbs/verbs_error.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace asio_rdma::detail {
namespace {

int membership(int fd, int option, unsigned index, boost::asio::ip::address_v4 group) {
  ip_mreqn request{};
  request.imr_multiaddr.s_addr = htonl(group.to_uint());
  request.imr_ifindex = static_cast<int>(index);
  return ::setsockopt(fd, IPPROTO_IP, option, &request, sizeof request);
}

} // namespace

multicast_groups::multicast_groups(unsigned interface_index, error_code& ec) noexcept
    : interface_index_(interface_index) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ec = fd_ < 0 ? from_errno() : error_code();
}

multicast_groups::~multicast_groups() {
  if (fd_ >= 0)
    ::close(fd_); // the kernel drops the memberships with the socket
}

error_code multicast_groups::join(boost::asio::ip::address_v4 group) noexcept {
  auto it = std::find_if(joined_.begin(), joined_.end(),
                         [&](const auto& entry) { return entry.first == group; });
  if (it != joined_.end()) {
    ++it->second;
    return {};
  }
  if (membership(fd_, IP_ADD_MEMBERSHIP, interface_index_, group) != 0)
    return from_errno();
  try {
    joined_.emplace_back(group, 1u);
  } catch (...) {
    membership(fd_, IP_DROP_MEMBERSHIP, interface_index_, group);
    return error_code(ENOMEM, boost::system::system_category());
  }
  return {};
}

void multicast_groups::leave(boost::asio::ip::address_v4 group) noexcept {
  auto it = std::find_if(joined_.begin(), joined_.end(),
                         [&](const auto& entry) { return entry.first == group; });
  if (it == joined_.end() || --it->second > 0)
    return;
  membership(fd_, IP_DROP_MEMBERSHIP, interface_index_, group);
  joined_.erase(it);
}

void multicast_groups::leave_all() noexcept {
  for (const auto& entry : joined_)
    membership(fd_, IP_DROP_MEMBERSHIP, interface_index_, entry.first);
  joined_.clear();
}

} // namespace asio_rdma::detail
