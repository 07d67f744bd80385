// asio-rdma: a peer's registered memory, as the target of one-sided operations.
#pragma once

#include <asio_rdma/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace asio_rdma {

/// Where a one-sided operation (RDMA read/write, atomics) goes in the peer's
/// memory: a virtual address, the region's remote key and a length.
///
/// It travels between peers in the stable encoding below (encode()/decode()),
/// typically in a message (connection::async_send_remote_buffer) or in the
/// connection's private data.
struct remote_buffer {
  /// The peer's virtual address of the first byte.
  std::uint64_t address = 0;
  /// The remote key of the peer's memory region.
  std::uint32_t rkey = 0;
  /// Length in bytes.
  std::uint64_t length = 0;

  /// Size of the encoding: version byte (1), 3 zero bytes, rkey (4 bytes),
  /// address (8), length (8); integers in network byte order.
  static constexpr std::size_t encoded_size = 24;
  /// The version byte of the encoding.
  static constexpr std::uint8_t encoding_version = 1;

  /// The part [offset, offset + length) of this buffer. If it does not lie
  /// within the buffer, the result has length 0 and address 0, and an
  /// operation on a non-empty local buffer against it fails with
  /// errc::out_of_bounds before anything is posted.
  remote_buffer slice(std::uint64_t offset, std::uint64_t size) const noexcept {
    if (offset > length || size > length - offset)
      return {0, rkey, 0};
    return {address + offset, rkey, size};
  }

  /// The 24-byte encoding described at encoded_size.
  std::array<std::byte, encoded_size> encode() const noexcept;

  /// Decodes an advertisement. errc::protocol_error if it is shorter than
  /// encoded_size (truncated), has an unknown version or non-zero reserved
  /// bytes; the result is then value-initialised.
  static remote_buffer decode(std::span<const std::byte> bytes, error_code& ec) noexcept;

  /// Equal if address, rkey and length are.
  friend bool operator==(const remote_buffer&, const remote_buffer&) = default;
};

} // namespace asio_rdma
