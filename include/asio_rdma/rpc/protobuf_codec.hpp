// asio-rdma RPC: Protocol Buffers messages as typed calls' requests and responses, so a
// gRPC service's .proto types carry over. Include it where such calls are made or served
// (it needs libprotobuf: Debian libprotobuf-dev; link protobuf::libprotobuf).
#pragma once

#include <asio_rdma/rpc/typed.hpp>

#include <google/protobuf/message_lite.h>

#include <climits>
#include <type_traits>

namespace asio_rdma::rpc {

/// A message's wire encoding (SerializeWithCachedSizesToArray / ParseFromArray). A message
/// above 2 GiB, protobuf's own limit, is not encoded: encode throws
/// boost::system::system_error(errc::request_too_large).
template <typename T>
struct codec<T, std::enable_if_t<std::is_base_of_v<google::protobuf::MessageLite, T>>> {
  static void encode(const T& message, std::vector<std::byte>& out) {
    const std::size_t size = message.ByteSizeLong();
    if (size > INT_MAX)
      throw boost::system::system_error(make_error_code(errc::request_too_large),
                                        "a protobuf message above 2 GiB");
    const std::size_t at = out.size();
    out.resize(at + size);
    message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.data() + at));
  }
  static bool decode(std::span<const std::byte> in, T& message) {
    return in.size() <= INT_MAX && message.ParseFromArray(in.data(), static_cast<int>(in.size()));
  }
};

} // namespace asio_rdma::rpc
