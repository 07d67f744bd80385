// Fuzzes rdma_bench's decoding of a client's connect private data (the test
// parameters a server accepts or rejects) and of the raw-verbs buffer
// description. Invariants: accepted parameters are within the documented
// ranges and encode back to the input's meaningful bytes; refused ones come
// with a reason for the rejection; every value round-trips through encode.
#include "fuzz_check.hpp"

#include "wire.hpp"

#include <cstring>
#include <span>
#include <string>

namespace {

bool same(const rdma_bench::test_parameters& a, const rdma_bench::test_parameters& b) {
  return a.op == b.op && a.mode == b.mode && a.bidirectional == b.bidirectional &&
         a.event_completion == b.event_completion &&
         a.adaptive_completion == b.adaptive_completion && a.post_answers == b.post_answers &&
         a.acknowledged_sends == b.acknowledged_sends && a.copied_sends == b.copied_sends &&
         a.asio_floor == b.asio_floor &&
         a.depth == b.depth && a.size == b.size && a.inline_size == b.inline_size &&
         a.adaptive_spin_us == b.adaptive_spin_us;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);

  std::string problem;
  const auto parameters = rdma_bench::decode(in, problem);
  if (!parameters) {
    FUZZ_CHECK(!problem.empty());
  } else {
    const auto& t = *parameters;
    FUZZ_CHECK(size >= rdma_bench::test_parameters::encoded_size);
    FUZZ_CHECK(t.depth > 0 && t.size > 0 && t.size <= (1u << 30));
    FUZZ_CHECK(t.adaptive_spin_us <= rdma_bench::test_parameters::max_adaptive_spin_us);
    const auto bytes = rdma_bench::encode(t);
    // Bytes 0-19 carry everything but the unknown flag bits.
    FUZZ_CHECK(std::memcmp(bytes.data(), data, 5) == 0);
    FUZZ_CHECK(std::to_integer<std::uint8_t>(bytes[5]) ==
               (data[5] & rdma_bench::wire::flag::known));
    FUZZ_CHECK(std::memcmp(bytes.data() + 6, data + 6, 14) == 0);
    std::string again;
    const auto back = rdma_bench::decode(bytes, again);
    FUZZ_CHECK(back && same(*back, t) && again.empty());
  }

  if (size >= rdma_bench::buffer_description::encoded_size) {
    const auto b = rdma_bench::decode_buffer(in.data());
    std::byte out[rdma_bench::buffer_description::encoded_size];
    rdma_bench::encode(b, out);
    FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
  }
  return 0;
}
