// The one scan of a port's GID table, for the three that need it (device_info lists it,
// an out-of-band queue pair chooses its source GID, a datagram socket finds its bound
// address's entry): each keeps its own policy, the scan is this.
#pragma once

#include "verbs/verbs_error.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>

namespace asio_rdma::detail {

/// Calls `visit(const ibv_gid_entry&)` for each entry in use of `port`'s table of
/// `table_length` entries, in index order, until it returns false. Entries not in use
/// are skipped (ibv_query_gid_ex's ENODATA). A kernel without the extended query gives
/// the plain GID, typed IB on InfiniBand and RoCE v1 on Ethernet. Fails only when even
/// the plain query fails.
template <typename Visit>
error_code for_each_gid(ibv_context* context, std::uint8_t port, int table_length,
                        std::uint8_t link_layer, Visit&& visit) {
  for (int i = 0; i < table_length; ++i) {
    ibv_gid_entry entry{};
    if (int rc = ::ibv_query_gid_ex(context, port, i, &entry, 0)) {
      if (rc == ENODATA)
        continue;
      if (::ibv_query_gid(context, port, i, &entry.gid) != 0)
        return from_errno();
      if (entry.gid.global.subnet_prefix == 0 && entry.gid.global.interface_id == 0)
        continue;
      entry.gid_index = static_cast<std::uint32_t>(i);
      entry.gid_type =
          link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_IB;
    }
    if (!visit(static_cast<const ibv_gid_entry&>(entry)))
      break;
  }
  return {};
}

} // namespace asio_rdma::detail
