// The traffic source: a thread in the sender's namespace writing UDP frames as fast as
// sendmmsg goes, through a plain AF_PACKET socket (independent of the library under test).
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <atomic>
#include <cstdint>
#include <string>

namespace raw_rate {

struct blast_result {
  std::uint64_t sent = 0;
  std::uint64_t dropped = 0; // ENOBUFS: the receiving side could not keep up
};

/// Sends UDP frames to `destination` (UDP port `port`) on `interface` of namespace `ns` until
/// `stop` becomes true.
blast_result blast(const std::string& ns, const std::string& interface,
                   const asio_rdma::mac_address& destination, std::uint16_t port,
                   std::size_t payload, const std::atomic<bool>& stop);

} // namespace raw_rate
