// asio-rdma: what one end of a reliable connection tells the other when the
// two connect their queue pairs themselves, without rdma_cm (see
// prepared_queue_pair.hpp).
#pragma once

#include <asio_rdma/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace asio_rdma {

/// The address of a reliable (RC) queue pair, as its peer needs it to connect
/// to it: queue pair number, port address (LID on InfiniBand, GID on RoCE),
/// initial packet sequence number, MTU and how many RDMA reads and atomics
/// it accepts. The equivalent of the Rust ibverbs crate's QueuePairEndpoint.
///
/// Exchange it over any channel (a TCP socket, MPI, a file): to_bytes() gives
/// 40 bytes that from_bytes() reads back on any machine.
///
/// Wire layout, version 1, 40 bytes, integers in network (big-endian) order:
///
///     0  'Q' 'P'   magic
///     2  u8        version (1)
///     3  u8        link layer (1: InfiniBand, 2: Ethernet/RoCE)
///     4  u32       queue pair number (24 bits, not 0)
///     8  u32       initial packet sequence number (24 bits)
///    12  u16       LID (InfiniBand; 0 on RoCE)
///    14  u8        port number on its device
///    15  u8        active MTU as ibv_mtu (1: 256 ... 5: 4096 bytes)
///    16  16 bytes  GID (RoCE: the port's address; may be 0 on InfiniBand)
///    32  u8        responder resources: RDMA reads / atomics it serves at once
///    33  u8        initiator depth: RDMA reads / atomics it issues at once
///    34  6 bytes   reserved, 0
///
/// An endpoint names a queue pair, not a process: give it only to the peer
/// that is to connect to it.
struct queue_pair_endpoint {
  /// The encoded size (to_bytes / from_bytes).
  static constexpr std::size_t encoded_size = 40;
  /// The layout version to_bytes writes and from_bytes accepts.
  static constexpr std::uint8_t version = 1;

  /// The queue pair number (24 bits).
  std::uint32_t qp_num = 0;
  /// The first packet sequence number it sends (24 bits); chosen at random.
  std::uint32_t psn = 0;
  /// The port's LID (InfiniBand; 0 on RoCE).
  std::uint16_t lid = 0;
  /// The port number on the device (informational for the peer).
  std::uint8_t port = 0;
  /// 1: InfiniBand, 2: Ethernet (RoCE, SoftRoCE). Both ends must agree.
  std::uint8_t link_layer = 0;
  /// The port's active MTU in bytes (256, 512, 1024, 2048 or 4096). The
  /// connection uses the smaller of the two ends' values.
  std::uint32_t mtu = 0;
  /// The GID the queue pair sends from (RoCE: IPv4 addresses as
  /// \::ffff:a.b.c.d), in network order.
  std::array<std::uint8_t, 16> gid{};
  /// RDMA reads and atomics it serves at once as responder.
  std::uint8_t responder_resources = 0;
  /// RDMA reads and atomics it has in flight at once as initiator.
  std::uint8_t initiator_depth = 0;

  /// The 40-byte encoding (layout above).
  std::array<std::byte, encoded_size> to_bytes() const noexcept;
  /// Decodes and checks an encoding. errc::bad_endpoint if `bytes` is not
  /// exactly 40 bytes, has another magic or version, or a field out of range
  /// (see errc::bad_endpoint); the result is then a default endpoint.
  static queue_pair_endpoint from_bytes(std::span<const std::byte> bytes, error_code& ec) noexcept;
  /// As above; throws boost::system::system_error.
  static queue_pair_endpoint from_bytes(std::span<const std::byte> bytes);
  /// Checks the fields as from_bytes does (for endpoints built by hand):
  /// errc::bad_endpoint, or no error.
  error_code check() const noexcept;

  /// Field by field.
  friend bool operator==(const queue_pair_endpoint&, const queue_pair_endpoint&) = default;
};

} // namespace asio_rdma
