// Fuzzes the connect/accept private-data path: the bytes and length a peer
// puts in its connect request, accept or reject, as cm_channel copies them
// out of an rdma_cm event (cm_event::set_private_data) before
// connection_request::private_data() and connection::peer_private_data()
// expose them; and remote_buffer decoding of that data, its usual content.
// Invariants: the copy is the claimed length capped at the event's capacity,
// byte for byte; nothing is read beyond what the peer sent.
#include "fuzz_check.hpp"

#include "cm/cm_channel.hpp"

#include <asio_rdma/remote_buffer.hpp>

#include <algorithm>
#include <cstring>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using asio_rdma::detail::cm_event;
  if (size < 1)
    return 0;
  // The first byte is rdma_cm's 8-bit length; the rest is the data. The copy
  // in its own allocation lets AddressSanitizer see any read beyond it.
  const std::size_t claimed = data[0];
  const std::size_t available = size - 1;
  const std::size_t length = std::min(claimed, available);
  auto bytes = std::make_unique<std::uint8_t[]>(length);
  std::memcpy(bytes.get(), data + 1, length);

  cm_event event;
  event.set_private_data(bytes.get(), length);
  const auto copied = event.data();
  FUZZ_CHECK(copied.size() == std::min(length, event.private_data.size()));
  FUZZ_CHECK(std::memcmp(copied.data(), bytes.get(), copied.size()) == 0);

  event.set_private_data(nullptr, claimed);
  FUZZ_CHECK(event.data().empty());

  // Anything over 255 bytes is capped, never wrapped.
  std::vector<std::uint8_t> big(available + 255, 0x5a);
  event.set_private_data(big.data(), big.size());
  FUZZ_CHECK(event.data().size() == std::min(big.size(), event.private_data.size()));

  asio_rdma::error_code ec;
  (void)asio_rdma::remote_buffer::decode(copied, ec);
  return 0;
}
