// Fuzzes queue_pair_endpoint::from_bytes, which reads what a peer sends over
// the user's own channel before prepared_queue_pair connects to it.
// Invariants: an accepted encoding passes check() and encodes back to the same
// 40 bytes; a refused one is errc::bad_endpoint with a default endpoint; an
// endpoint built from arbitrary field values round-trips iff check() accepts it.
#include "fuzz_check.hpp"

#include <asio_rdma/queue_pair_endpoint.hpp>

#include <algorithm>
#include <cstring>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using asio_rdma::queue_pair_endpoint;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);

  asio_rdma::error_code ec;
  const queue_pair_endpoint decoded = queue_pair_endpoint::from_bytes(in, ec);
  if (ec) {
    FUZZ_CHECK(ec == asio_rdma::errc::bad_endpoint);
    FUZZ_CHECK(decoded == queue_pair_endpoint{});
  } else {
    FUZZ_CHECK(size == queue_pair_endpoint::encoded_size);
    FUZZ_CHECK(!decoded.check());
    const auto again = decoded.to_bytes();
    FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin()));
  }

  // Fields from the input, not through the decoder: valid ones survive
  // to_bytes/from_bytes unchanged, invalid ones are refused by both paths.
  if (size >= 32) {
    queue_pair_endpoint e;
    std::memcpy(&e.qp_num, data, 4);
    std::memcpy(&e.psn, data + 4, 4);
    std::memcpy(&e.lid, data + 8, 2);
    e.port = data[10];
    e.link_layer = data[11] % 4;
    std::memcpy(&e.mtu, data + 12, 4);
    if (data[11] & 0x80)
      e.mtu = 128u << (data[11] % 6); // reach the valid sizes often
    std::memcpy(e.gid.data(), data + 16, 14);
    e.responder_resources = data[30];
    e.initiator_depth = data[31];
    const auto bytes = e.to_bytes();
    const queue_pair_endpoint back = queue_pair_endpoint::from_bytes(bytes, ec);
    if (e.check()) {
      FUZZ_CHECK(ec == asio_rdma::errc::bad_endpoint);
    } else {
      FUZZ_CHECK(!ec && back == e);
    }
  }
  return 0;
}
