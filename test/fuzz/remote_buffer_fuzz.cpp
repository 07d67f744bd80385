// Fuzzes remote_buffer::decode, which reads a peer's advertisement
// (connection::async_receive_remote_buffer, the file transfer's hello_ack).
// Invariants: a decoded advertisement encodes back to the same 24 bytes; a
// refused one is errc::protocol_error with a value-initialised result; any
// value round-trips through encode/decode; slice() stays inside its buffer.
#include "fuzz_check.hpp"

#include <asio_rdma/remote_buffer.hpp>

#include <algorithm>
#include <cstring>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using asio_rdma::remote_buffer;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);

  asio_rdma::error_code ec;
  const remote_buffer decoded = remote_buffer::decode(in, ec);
  if (ec) {
    FUZZ_CHECK(ec == asio_rdma::errc::protocol_error);
    FUZZ_CHECK(decoded == remote_buffer{});
  } else {
    FUZZ_CHECK(size >= remote_buffer::encoded_size);
    const auto again = decoded.encode();
    FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin()));
  }

  // Any value survives encode/decode.
  if (size >= 20) {
    remote_buffer value;
    std::memcpy(&value.address, data, 8);
    std::memcpy(&value.rkey, data + 8, 4);
    std::memcpy(&value.length, data + 12, 8);
    const auto bytes = value.encode();
    const remote_buffer back = remote_buffer::decode(bytes, ec);
    FUZZ_CHECK(!ec && back == value);

    // A slice is either inside the buffer or empty at address 0.
    if (size >= 36) {
      std::uint64_t offset, length;
      std::memcpy(&offset, data + 20, 8);
      std::memcpy(&length, data + 28, 8);
      const remote_buffer part = value.slice(offset, length);
      FUZZ_CHECK(part.rkey == value.rkey);
      if (offset <= value.length && length <= value.length - offset)
        FUZZ_CHECK(part.address == value.address + offset && part.length == length);
      else
        FUZZ_CHECK(part.address == 0 && part.length == 0);
    }
  }
  return 0;
}
