// queue_pair_endpoint: its 40-byte encoding and checks (layout in the header).
#include <asio_rdma/queue_pair_endpoint.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>

namespace asio_rdma {

namespace {

void put(std::byte* p, std::uint64_t value, int bytes) noexcept {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<std::byte>(value >> (8 * (bytes - 1 - i))); // big-endian
}

std::uint64_t get(const std::byte* p, int bytes) noexcept {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value = (value << 8) | std::to_integer<std::uint8_t>(p[i]);
  return value;
}

// ibv_mtu: 1 = 256 ... 5 = 4096; 0 for anything else.
std::uint8_t mtu_code(std::uint32_t bytes) noexcept {
  for (std::uint8_t code = 1; code <= 5; ++code)
    if (bytes == (128u << code))
      return code;
  return 0;
}

constexpr std::uint32_t max_24_bits = 0xffffff;

} // namespace

std::array<std::byte, queue_pair_endpoint::encoded_size>
queue_pair_endpoint::to_bytes() const noexcept {
  std::array<std::byte, encoded_size> out{};
  out[0] = std::byte{'Q'};
  out[1] = std::byte{'P'};
  out[2] = std::byte{version};
  out[3] = std::byte{link_layer};
  put(&out[4], qp_num, 4);
  put(&out[8], psn, 4);
  put(&out[12], lid, 2);
  out[14] = std::byte{port};
  out[15] = std::byte{mtu_code(mtu)};
  std::transform(gid.begin(), gid.end(), &out[16], [](std::uint8_t b) { return std::byte{b}; });
  out[32] = std::byte{responder_resources};
  out[33] = std::byte{initiator_depth};
  return out;
}

error_code queue_pair_endpoint::check() const noexcept {
  const bool gid_zero = std::all_of(gid.begin(), gid.end(), [](auto b) { return b == 0; });
  if (qp_num == 0 || qp_num > max_24_bits || psn > max_24_bits || mtu_code(mtu) == 0 ||
      (link_layer != 1 && link_layer != 2) || (link_layer == 1 && lid == 0) ||
      (link_layer == 2 && gid_zero))
    return errc::bad_endpoint;
  return {};
}

queue_pair_endpoint queue_pair_endpoint::from_bytes(std::span<const std::byte> in,
                                                    error_code& ec) noexcept {
  ec = errc::bad_endpoint;
  if (in.size() != encoded_size || in[0] != std::byte{'Q'} || in[1] != std::byte{'P'} ||
      in[2] != std::byte{version})
    return {};
  for (std::size_t i = 34; i < encoded_size; ++i)
    if (in[i] != std::byte{0})
      return {}; // reserved bytes: a later version, or garbage
  queue_pair_endpoint e;
  e.link_layer = static_cast<std::uint8_t>(get(&in[3], 1));
  e.qp_num = static_cast<std::uint32_t>(get(&in[4], 4));
  e.psn = static_cast<std::uint32_t>(get(&in[8], 4));
  e.lid = static_cast<std::uint16_t>(get(&in[12], 2));
  e.port = static_cast<std::uint8_t>(get(&in[14], 1));
  const auto code = get(&in[15], 1);
  e.mtu = code >= 1 && code <= 5 ? 128u << code : 0;
  for (std::size_t i = 0; i < 16; ++i)
    e.gid[i] = std::to_integer<std::uint8_t>(in[16 + i]);
  e.responder_resources = static_cast<std::uint8_t>(get(&in[32], 1));
  e.initiator_depth = static_cast<std::uint8_t>(get(&in[33], 1));
  if ((ec = e.check()))
    return {};
  return e;
}

queue_pair_endpoint queue_pair_endpoint::from_bytes(std::span<const std::byte> in) {
  error_code ec;
  auto e = from_bytes(in, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::queue_pair_endpoint::from_bytes");
  return e;
}

} // namespace asio_rdma
