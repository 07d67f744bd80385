// One protection domain per RDMA device, shared by every connection on it, so
// memory registered once can be used on all of them.
#pragma once

#include "verbs/handles.hpp"

#include <asio_rdma/error.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace asio_rdma::detail {

struct device {
  ibv_context* context = nullptr; // owned by librdmacm
  pd_ptr pd;
  ibv_device_attr attributes{};
  /// iWARP (its transport has no immediate data and no unreliable datagrams).
  bool iwarp = false;
  /// SoftiWARP (siw, known by its vendor id): it sends an unsignalled request's payload of
  /// more than a page from the user's pages (send_window::set_signal_large_payloads).
  bool soft_iwarp = false;
  /// SoftRoCE (rxe, known by its vendor id): an RDMA operation runs to its end, both
  /// sides' work included, in the CPU of the process that posts it (docs/stream.md).
  bool soft_roce = false;
  /// The device's name ("rxe0", "siw0"), for error messages.
  std::string name;
  /// errc::operation_not_supported naming the device and what it lacks, made once here
  /// so that refusing an operation costs no more than the plain code.
  error_code no_immediate_data;
  error_code no_atomics;

  /// errc::device_limit_exceeded saying what asked for how much, and the device's
  /// maximum: "send queue depth 4096 exceeds siw0's maximum 1024 (max_qp_wr)".
  error_code limit_exceeded(std::string_view what, std::uint64_t asked, int maximum,
                            std::string_view limit) const;

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

/// errc::device_limit_exceeded for a queue `context`'s device refused without an errno
/// (siw's provider, when a queue's mapping lands on its invalid offset: docs/devices.md):
/// names the device and `what` ("a completion queue of 64 entries").
error_code refused_without_errno(ibv_context* context, std::string_view what);

} // namespace asio_rdma::detail
