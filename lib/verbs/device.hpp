// One protection domain per RDMA device, shared by every connection on it, so
// memory registered once can be used on all of them.
#pragma once

#include "verbs/handles.hpp"

#include <asio_rdma/error.hpp>

#include <memory>

namespace asio_rdma::detail {

struct device {
  ibv_context* context = nullptr; // owned by librdmacm
  pd_ptr pd;
  ibv_device_attr attributes{};
  /// iWARP (its transport has no immediate data and no unreliable datagrams).
  bool iwarp = false;

  /// Write and send with immediate data.
  bool has_immediate_data() const noexcept { return !iwarp; }
  /// RDMA fetch-and-add and compare-and-swap.
  bool has_atomics() const noexcept { return attributes.atomic_cap != IBV_ATOMIC_NONE; }
  /// Unreliable datagram queue pairs (and so multicast).
  bool has_datagrams() const noexcept { return !iwarp; }
};

/// The shared device object for `context`, created on first use. Called only
/// when a connection is set up, never on the data path.
std::shared_ptr<device> get_device(ibv_context* context, error_code& ec);

} // namespace asio_rdma::detail
