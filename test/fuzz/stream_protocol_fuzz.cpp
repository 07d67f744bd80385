// Fuzzes what a stream does with its peer's messages (lib/stream: stream_wire::parse and
// the windows of stream_window.hpp), as stream_impl::handle applies them: the input is a
// hostile peer's sequence of messages, each with or without immediate data, as an RDMA
// write or a send, of any size and body, mixed with the local application's reads and
// writes. Invariants: parsing reads no byte outside the message (ASan); an advertisement
// that parses encodes back to the same bytes, with a ring in bounds; a data word on an
// RDMA write announces exactly what was written; the reader's ring never holds more than
// it can (whatever the peer announces or offers to be pulled); a pull stays inside the
// ring and the peer's send buffer; the writer is never credited more than it posted, nor
// told of more pulled bytes than it left; a post stays inside both rings.
#include "fuzz_check.hpp"

#include "stream/stream_window.hpp"
#include "stream/stream_wire.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

namespace wire = asio_rdma::detail::stream_wire;
using asio_rdma::detail::stream_reader_window;
using asio_rdma::detail::stream_writer_window;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stream_reader_window in(4096 + (size % 7) * 1000); // sizes no power of two too
  stream_writer_window out(4096);
  bool advertised = false, ended = false;
  std::size_t peer_ring = 0, peer_send = 0;
  std::size_t at = 0;
  // Records: flags (1), size (1), immediate (4), then `size % 41` body bytes.
  while (size - at >= 6) {
    const std::uint8_t flags = data[at];
    const std::size_t body_size = data[at + 1] % 41;
    std::uint32_t imm;
    std::memcpy(&imm, data + at + 2, 4);
    at += 6;
    if (flags & 4) { // the local application's turn: read some, write some, complete
      const std::size_t n = imm % 5000;
      const std::size_t taken = std::min(n, in.available());
      in.consumed(taken);
      if (const std::size_t credit = in.credit_due())
        in.credit_sent(credit);
      out.copied(std::min(n, out.room()));
      if (flags & 8)
        out.write_completed(); // the oldest write in flight, if any
      if (flags & 16 && in.pulls_in_flight() > 0)
        in.pull_landed();
      const auto p = out.next_post(1024 + n);
      FUZZ_CHECK(p.length <= 4096);
      if (p.length && out.in_flight() < stream_writer_window::max_in_flight) {
        FUZZ_CHECK(advertised && p.local_offset + p.length <= 4096);
        FUZZ_CHECK(p.remote_offset + p.length <= peer_ring);
        out.posted(p.length, flags & 32 ? stream_writer_window::by::pull
                                        : stream_writer_window::by::write);
      }
      FUZZ_CHECK(out.room() <= 4096);
      continue;
    }
    // A message from the peer, its body in memory of exactly its size.
    const std::size_t available = std::min(body_size, size - at);
    auto body = std::make_unique<std::byte[]>(available ? available : 1);
    std::memcpy(body.get(), data + at, available);
    at += available;
    const std::optional<std::uint32_t> immediate =
        (flags & 1) ? std::optional<std::uint32_t>(imm) : std::nullopt;
    const bool rdma_write = flags & 2;
    const std::size_t message_size = rdma_write ? imm % 70000 : available;
    const wire::message m = wire::parse(immediate, rdma_write, message_size, body.get());
    using what = wire::message::what;
    switch (m.type) {
    case what::advertisement: {
      FUZZ_CHECK(!rdma_write && !immediate);
      FUZZ_CHECK(available == (m.advertised.version == 2 ? wire::advertisement_size
                                                         : wire::advertisement_v1_size));
      FUZZ_CHECK(m.advertised.ring_size >= wire::min_ring_size &&
                 m.advertised.ring_size <= wire::max_ring_size);
      FUZZ_CHECK(m.advertised.send_size == 0 ||
                 (m.advertised.send_size >= wire::min_ring_size &&
                  m.advertised.send_size <= wire::max_ring_size));
      if (m.advertised.version == 2) {
        const auto again = wire::encode(m.advertised);
        FUZZ_CHECK(std::memcmp(again.data(), body.get(), again.size()) == 0);
      }
      if (!advertised) {
        advertised = true;
        peer_ring = m.advertised.ring_size;
        out.set_peer_ring(peer_ring);
        in.set_peer_send_buffer(m.advertised.send_size);
        peer_send = m.advertised.send_size;
      }
      break;
    }
    case what::data: {
      if (rdma_write)
        FUZZ_CHECK(m.value == message_size);
      const std::size_t before = in.available();
      if (!ended && in.arrived(m.value)) // readable now, or behind a pull once it lands
        FUZZ_CHECK(in.available() == before + (in.pulls_in_flight() ? 0 : m.value));
      else
        FUZZ_CHECK(in.available() == before); // refused: nothing changes
      FUZZ_CHECK(in.available() <= in.ring_size());
      break;
    }
    case what::pull: {
      FUZZ_CHECK(!rdma_write && m.value > 0);
      const std::size_t before = in.available();
      if (!ended && in.offered(m.value)) {
        FUZZ_CHECK(in.pulls_in_flight() <= wire::max_pulls);
        FUZZ_CHECK(in.pull_target(m.value) + m.value <= in.ring_size());
        FUZZ_CHECK(peer_send > 0 && in.pull_source(m.value) + m.value <= peer_send);
      }
      FUZZ_CHECK(in.available() == before); // readable only once the pull lands
      break;
    }
    case what::pulled:
      FUZZ_CHECK(!rdma_write && m.value > 0);
      out.pulled(m.value); // refused or not, the invariant below holds
      FUZZ_CHECK(out.room() <= 4096);
      break;
    case what::credit:
      FUZZ_CHECK(!rdma_write);
      out.credit(m.value); // refused or not, the invariant below holds
      FUZZ_CHECK(out.room() <= 4096);
      break;
    case what::end:
      FUZZ_CHECK(!rdma_write && m.value == 0);
      ended = true;
      break;
    case what::malformed:
      break;
    }
  }
  return 0;
}
