// asio-rdma: the RDMA devices of this machine, their ports, GIDs and limits
// (what `ibv_devinfo -v` shows), as plain values.
//
// These are synchronous calls: each opens the device, queries it and closes
// it again, so call them at start-up or for diagnostics, not per operation.
// They may be called from any thread.
#pragma once

#include <asio_rdma/error.hpp>

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace asio_rdma {

/// The logical state of a port (ibv_port_state).
enum class port_state : std::uint8_t {
  nop = 0,
  down = 1,
  init = 2,
  armed = 3,
  /// Ready for traffic.
  active = 4,
  active_defer = 5,
};

/// The link layer of a port: InfiniBand, or Ethernet (RoCE, SoftRoCE, iWARP).
enum class link_layer : std::uint8_t { unspecified = 0, infiniband = 1, ethernet = 2 };

/// How the device's queue pairs may perform atomic operations (ibv_atomic_cap).
enum class atomic_capability : std::uint8_t {
  /// No atomic operations.
  none = 0,
  /// Atomic with respect to other operations of this device only.
  device = 1,
  /// Atomic with respect to the CPU and other devices too.
  global = 2,
};

/// The kind of a GID table entry.
enum class gid_type : std::uint8_t { ib = 0, roce_v1 = 1, roce_v2 = 2 };

/// "PORT_ACTIVE" and so on, as ibv_devinfo spells them.
std::string_view to_string(port_state s) noexcept;
/// "InfiniBand", "Ethernet" or "Unspecified", as ibv_devinfo spells them.
std::string_view to_string(link_layer l) noexcept;
/// "IB", "RoCE v1" or "RoCE v2".
std::string_view to_string(gid_type t) noexcept;
/// "ATOMIC_NONE", "ATOMIC_HCA" (device) or "ATOMIC_GLOB".
std::string_view to_string(atomic_capability a) noexcept;

/// One valid entry of a port's GID table.
struct gid_entry {
  /// Its index in the port's table (the sgid_index a queue pair would use).
  std::uint32_t index = 0;
  std::array<std::uint8_t, 16> raw{}; ///< The 16 bytes of the GID, in network order.
  gid_type type = gid_type::ib; ///< InfiniBand, RoCE v1 or RoCE v2.
  /// The network interface it belongs to (RoCE), 0 for none.
  std::uint32_t netdev_index = 0;

  /// The GID in IPv6 notation, e.g. "fe80::5054:ff:fe12:3456" or
  /// "::ffff:192.0.2.1".
  std::string to_string() const;
};

/// One port of a device (ibv_query_port plus its GID table).
struct port_info {
  /// Port number, counting from 1.
  std::uint8_t number = 0;
  port_state state = port_state::nop; ///< Down, initialising, armed, active ...
  link_layer layer = link_layer::unspecified; ///< InfiniBand or Ethernet (RoCE).
  /// MTUs in bytes (256 ... 4096).
  std::uint32_t max_mtu = 0;
  std::uint32_t active_mtu = 0; ///< The MTU in use (the path MTU of RC and the datagram limit of UD).
  /// Largest message a work request may carry.
  std::uint32_t max_message_size = 0;
  /// The raw ibv_port_attr encodings of the link, for exact comparisons.
  std::uint8_t active_width_code = 0;
  std::uint8_t active_speed_code = 0; ///< ibv_port_attr::active_speed.
  /// Lanes (1, 2, 4, 8 or 12; 0 if unknown) and per-lane rate in Gb/s
  /// (2.5 ... 100; 0 if unknown): the link rate is their product.
  int lanes = 0;
  double lane_gbps = 0; ///< Per-lane rate in Gb/s.
  double rate_gbps() const noexcept { return lanes * lane_gbps; } ///< The link rate in Gb/s: lanes x lane_gbps (0 if unknown).
  /// InfiniBand addressing (0 on Ethernet).
  std::uint16_t lid = 0;
  std::uint16_t sm_lid = 0; ///< The subnet manager's LID (InfiniBand).
  /// Size of the GID table, and its valid entries.
  int gid_table_length = 0;
  std::vector<gid_entry> gids; ///< The valid entries of the GID table.
};

/// What the device supports (ibv_query_device): the limits users most often
/// need when sizing queues and regions.
struct device_limits {
  std::uint64_t max_mr_size = 0; ///< Largest memory region, in bytes.
  std::uint64_t page_size_cap = 0; ///< Page sizes the device supports (a bit per size).
  int max_qp = 0; ///< Queue pairs.
  /// Work requests per send or receive queue.
  int max_qp_wr = 0;
  /// Scatter/gather entries per work request.
  int max_sge = 0;
  /// Scatter entries an RDMA read may write into (siw: 1); an async_read with more
  /// fails with asio::error::invalid_argument before it is posted.
  int max_sge_rd = 0;
  int max_cq = 0; ///< Completion queues.
  int max_cqe = 0; ///< Entries per completion queue.
  int max_mr = 0; ///< Memory regions.
  int max_pd = 0; ///< Protection domains.
  /// RDMA reads and atomics a queue pair may have in flight as responder
  /// (max_qp_rd_atom) and as initiator (max_qp_init_rd_atom).
  int max_qp_rd_atom = 0;
  int max_qp_init_rd_atom = 0; ///< RDMA reads and atomics in flight as initiator.
  int max_srq = 0; ///< Shared receive queues.
  int max_srq_wr = 0; ///< Work requests per shared receive queue.
  int max_srq_sge = 0; ///< Scatter/gather entries per shared receive work request.
  int max_ah = 0; ///< Address handles (datagram peers).
  int max_mcast_grp = 0; ///< Multicast groups.
  int max_mcast_qp_attach = 0; ///< Queue pairs per multicast group.
  int max_total_mcast_qp_attach = 0; ///< Multicast attachments in all.
  atomic_capability atomics = atomic_capability::none; ///< Whether and how atomics are atomic (none, within the device, global).
};

/// One RDMA device.
struct device_info {
  /// The device's name, e.g. "mlx5_0" or "rxe0".
  std::string name;
  /// "InfiniBand", "iWARP", ... (ibv_device's transport type).
  std::string transport;
  std::string firmware_version; ///< Firmware version as the device reports it.
  /// GUIDs in host byte order.
  std::uint64_t node_guid = 0;
  std::uint64_t sys_image_guid = 0; ///< System image GUID (host byte order).
  std::uint32_t vendor_id = 0; ///< IEEE vendor id.
  std::uint32_t vendor_part_id = 0; ///< Vendor part id.
  std::uint32_t hardware_version = 0; ///< Hardware version.
  device_limits limits; ///< What the device supports.
  /// Write and send with immediate data (not on iWARP); without it they fail with
  /// errc::operation_not_supported before anything is posted.
  bool immediate_data = false;
  /// Unreliable datagrams, and so datagram_socket and multicast (not on iWARP; a
  /// datagram_socket there fails with errc::operation_not_supported).
  bool datagrams = false;
  /// Atomics (fetch-and-add, compare-and-swap): limits.atomics is not none. Without
  /// them they fail with errc::operation_not_supported before anything is posted.
  bool has_atomics() const noexcept { return limits.atomics != atomic_capability::none; }
  /// Every physical port, in order (port 1 first).
  std::vector<port_info> ports;
};

/// Every RDMA device of this machine with its ports, GIDs and limits. A
/// machine whose kernel has no RDMA support (ibv_get_device_list fails with
/// ENOSYS) has no devices: the result is empty, not an error. Other failures
/// (no permission to open a device, ...) are errors.
/// Throws boost::system::system_error.
std::vector<device_info> list_devices();
/// As above; reports failures through `ec` (and returns an empty vector).
std::vector<device_info> list_devices(error_code& ec);

/// The device named `name`. errc::no_device if there is none of that name.
/// Throws boost::system::system_error.
device_info query_device(std::string_view name);
/// As above; reports failures through `ec`.
device_info query_device(std::string_view name, error_code& ec);

/// A short, multi-line human-readable summary: the device, its main limits,
/// and per port its state, link, MTU and GIDs.
std::ostream& operator<<(std::ostream& os, const device_info& d);

} // namespace asio_rdma
