// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): checks every chunk
// of a transfer end to end. ISA-L's crc32_iscsi picks the fastest code for
// this CPU at run time (the SSE4.2 crc32 instruction on three streams at
// once, PCLMULQDQ folding). It neither inverts its input nor its output: the
// standard CRC-32C is ~crc32_iscsi(data, ~crc).
#include "protocol.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace asio_rdma::detail::file_protocol {

std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data) noexcept {
  crc = ~crc;
  // crc32_iscsi takes an int length and a non-const pointer it only reads.
  constexpr std::size_t max_piece = std::size_t(1) << 30;
  while (!data.empty()) {
    std::size_t n = std::min(data.size(), max_piece);
    auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data()));
    crc = crc32_iscsi(p, static_cast<int>(n), crc);
    data = data.subspan(n);
  }
  return ~crc;
}

} // namespace asio_rdma::detail::file_protocol
