// IPv4 multicast memberships joined on behalf of flow rules. A kernel membership (IP_ADD_MEMBERSHIP
// on a UDP socket, by interface index) sends the IGMP report that makes switches forward the
// group and adds the group's MAC to the NIC's filter; the raw socket then steers the frames.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/ip/address_v4.hpp>

#include <utility>
#include <vector>

namespace asio_rdma::detail {

class multicast_groups {
public:
  /// Opens the membership socket in the calling thread's network namespace.
  multicast_groups(unsigned interface_index, error_code& ec) noexcept;
  ~multicast_groups();
  multicast_groups(const multicast_groups&) = delete;
  multicast_groups& operator=(const multicast_groups&) = delete;

  /// Joins `group` (counted: joining twice needs leaving twice).
  error_code join(boost::asio::ip::address_v4 group) noexcept;
  /// Undoes one join.
  void leave(boost::asio::ip::address_v4 group) noexcept;
  /// Leaves every group.
  void leave_all() noexcept;

private:
  int fd_ = -1;
  unsigned interface_index_;
  std::vector<std::pair<boost::asio::ip::address_v4, unsigned>> joined_;
};

} // namespace asio_rdma::detail
