// asio-rdma RPC: how a method's name travels.
#pragma once

#include <cstdint>
#include <string_view>

namespace asio_rdma::rpc {

/// The id that stands for the method `name` on the wire: its 32-bit FNV-1a hash. A server
/// refuses to register two names with one id, so a client's call never reaches another
/// method than the one it names.
constexpr std::uint32_t method_id(std::string_view name) noexcept {
  std::uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

} // namespace asio_rdma::rpc
