// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven,
// slicing by one byte: checks every chunk of a transfer end to end.
#include <asio_rdma/detail/file_protocol.hpp>

#include <array>

namespace asio_rdma::detail::file_protocol {

namespace {

constexpr std::array<std::uint32_t, 256> make_table() noexcept {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto table = make_table();

} // namespace

std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data) noexcept {
  crc = ~crc;
  for (std::byte b : data)
    crc = table[(crc ^ std::to_integer<std::uint32_t>(b)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

} // namespace asio_rdma::detail::file_protocol
