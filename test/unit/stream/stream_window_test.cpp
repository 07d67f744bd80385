// The stream protocol's bookkeeping (lib/stream/stream_window.hpp) and its wire encoding
// (stream_wire.hpp) without a device: credit, where the rings wrap, a peer that writes
// past its credit or returns credit it was never given, and malformed advertisements.
#define BOOST_TEST_MODULE stream_window
#include <boost/test/unit_test.hpp>

#include "stream/stream_window.hpp"
#include "stream/stream_wire.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <vector>

namespace {
using asio_rdma::detail::stream_reader_window;
using asio_rdma::detail::stream_writer_window;
namespace wire = asio_rdma::detail::stream_wire;
} // namespace

BOOST_AUTO_TEST_SUITE(writer_window_tests)

BOOST_AUTO_TEST_CASE(nothing_is_written_before_the_peer_advertises_its_ring) {
  stream_writer_window w(4096);
  BOOST_TEST(w.room() == 0u);
  BOOST_TEST(w.next_post(1 << 20).length == 0u);
  w.set_peer_ring(8192);
  BOOST_TEST(w.room() == 4096u); // the send buffer is the smaller
}

BOOST_AUTO_TEST_CASE(credit_bounds_the_bytes_in_the_peers_ring) {
  stream_writer_window w(1 << 20);
  w.set_peer_ring(4096);
  BOOST_TEST(w.room() == 4096u);
  w.copied(4096);
  BOOST_TEST(w.room() == 0u);
  auto p = w.next_post(1 << 20);
  BOOST_TEST(p.length == 4096u);
  w.posted(p.length);
  w.write_completed();
  BOOST_TEST(w.room() == 0u); // completed, but the reader has not read them
  BOOST_TEST(w.credit(1024));
  BOOST_TEST(w.room() == 1024u);
}

BOOST_AUTO_TEST_CASE(the_send_buffer_is_free_again_once_writes_complete) {
  stream_writer_window w(4096);
  w.set_peer_ring(1 << 20);
  w.copied(4096);
  BOOST_TEST(w.room() == 0u);
  w.posted(4096);
  BOOST_TEST(w.room() == 0u); // posted: the device still reads the buffer
  w.write_completed();
  BOOST_TEST(w.room() == 4096u);
}

BOOST_AUTO_TEST_CASE(bytes_left_to_pull_are_free_once_pulled_and_in_the_order_posted) {
  stream_writer_window w(4096);
  w.set_peer_ring(1 << 20);
  w.copied(3000);
  w.posted(1000);
  w.posted(1000, stream_writer_window::by::pull);
  w.posted(1000);
  BOOST_TEST(w.in_flight() == 3u);
  BOOST_TEST(w.pulls_pending()); // the end of data would wait
  w.write_completed();
  BOOST_TEST(w.room() == 2096u); // the first write's 1000 bytes
  w.write_completed();           // the third post: behind the pull, still held
  BOOST_TEST(w.room() == 2096u);
  BOOST_TEST(w.in_flight() == 2u);
  BOOST_TEST(!w.pulled(999)); // not what was left
  BOOST_TEST(w.pulls_pending());
  BOOST_TEST(w.pulled(1000));
  BOOST_TEST(!w.pulls_pending());
  BOOST_TEST(w.room() == 4096u);
  BOOST_TEST(w.in_flight() == 0u);
  BOOST_TEST(!w.pulled(1000)); // nothing left to pull
}

BOOST_AUTO_TEST_CASE(posts_are_cut_where_either_ring_wraps_and_at_the_maximum) {
  stream_writer_window w(4096);
  w.set_peer_ring(6144);
  w.copied(3000);
  auto p = w.next_post(1000);
  BOOST_TEST(p.local_offset == 0u);
  BOOST_TEST(p.remote_offset == 0u);
  BOOST_TEST(p.length == 1000u);
  w.posted(1000);
  p = w.next_post(1 << 20);
  BOOST_TEST(p.length == 2000u);
  w.posted(2000);
  w.write_completed();
  w.write_completed();
  BOOST_TEST(w.credit(3000));
  // 3000 .. 7096: the send buffer wraps at 4096, the peer's ring at 6144.
  w.copied(4096);
  p = w.next_post(1 << 20);
  BOOST_TEST(p.local_offset == 3000u);
  BOOST_TEST(p.remote_offset == 3000u);
  BOOST_TEST(p.length == 1096u); // to the send buffer's end
  w.posted(p.length);
  p = w.next_post(1 << 20);
  BOOST_TEST(p.local_offset == 0u);
  BOOST_TEST(p.remote_offset == 4096u);
  BOOST_TEST(p.length == 2048u); // to the peer ring's end
  w.posted(p.length);
  p = w.next_post(1 << 20);
  BOOST_TEST(p.local_offset == 2048u);
  BOOST_TEST(p.remote_offset == 0u);
  BOOST_TEST(p.length == 952u);
  w.posted(p.length);
  BOOST_TEST(w.all_posted());
  BOOST_TEST(w.next_post(1 << 20).length == 0u);
}

BOOST_AUTO_TEST_CASE(credit_beyond_what_was_posted_is_refused) {
  stream_writer_window w(4096);
  w.set_peer_ring(4096);
  BOOST_TEST(!w.credit(1)); // nothing posted
  w.copied(100);
  BOOST_TEST(!w.credit(100)); // copied, not posted
  w.posted(100);
  BOOST_TEST(!w.credit(0));
  BOOST_TEST(!w.credit(101));
  BOOST_TEST(w.credit(60));
  BOOST_TEST(!w.credit(41));
  BOOST_TEST(w.credit(40));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(reader_window_tests)

BOOST_AUTO_TEST_CASE(arrived_bytes_are_read_across_the_wrap) {
  stream_reader_window r(4096);
  BOOST_TEST(r.arrived(4000));
  r.consumed(4000);
  BOOST_TEST(r.arrived(200)); // 4000 .. 4200: wraps
  BOOST_TEST(r.read_offset() == 4000u);
  BOOST_TEST(r.contiguous() == 96u);
  r.consumed(96);
  BOOST_TEST(r.read_offset() == 0u);
  BOOST_TEST(r.contiguous() == 104u);
  r.consumed(104);
  BOOST_TEST(r.available() == 0u);
}

BOOST_AUTO_TEST_CASE(a_peer_that_writes_past_its_credit_is_refused) {
  stream_reader_window r(4096);
  BOOST_TEST(!r.arrived(0));
  BOOST_TEST(!r.arrived(4097));
  BOOST_TEST(r.arrived(4000));
  BOOST_TEST(!r.arrived(97));
  BOOST_TEST(r.arrived(96));
  r.consumed(1000);
  BOOST_TEST(!r.arrived(1001));
  BOOST_TEST(r.arrived(1000));
}

BOOST_AUTO_TEST_CASE(credit_is_returned_a_quarter_ring_at_a_time) {
  stream_reader_window r(4096);
  BOOST_TEST(r.arrived(4096));
  r.consumed(1023);
  BOOST_TEST(r.credit_due() == 0u);
  r.consumed(1);
  BOOST_TEST(r.credit_due() == 1024u);
  r.credit_sent(1024);
  BOOST_TEST(r.credit_due() == 0u);
  r.consumed(3072);
  BOOST_TEST(r.credit_due() == 3072u);
}

BOOST_AUTO_TEST_CASE(pulled_bytes_are_readable_once_they_land_and_bytes_after_them_wait) {
  stream_reader_window r(8192);
  BOOST_TEST(!r.offered(100)); // the peer advertised no send buffer
  r.set_peer_send_buffer(4096);
  BOOST_TEST(r.arrived(100));
  BOOST_TEST(r.offered(200));
  BOOST_TEST(r.pull_source(200) == 100u);
  BOOST_TEST(r.pull_target(200) == 100u);
  BOOST_TEST(r.arrived(300)); // written after the pull: waits for it
  BOOST_TEST(r.available() == 100u);
  BOOST_TEST(r.pulls_in_flight() == 1u);
  r.pull_landed();
  BOOST_TEST(r.available() == 600u);
  BOOST_TEST(r.pulls_in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(pulls_a_writer_could_not_have_offered_are_refused) {
  stream_reader_window r(8192);
  r.set_peer_send_buffer(4096);
  BOOST_TEST(!r.offered(0));
  BOOST_TEST(!r.offered(4097)); // crosses the end of the peer's send buffer
  BOOST_TEST(r.arrived(4000));
  BOOST_TEST(!r.offered(200)); // 4000 .. 4200 crosses the send buffer's end
  BOOST_TEST(r.offered(96));
  BOOST_TEST(r.arrived(4000)); // 8096 of 8192
  BOOST_TEST(!r.offered(200)); // past the ring's room: past its credit
  r.consumed(r.available());
  BOOST_TEST(!r.offered(200)); // 8096 .. 8296 crosses the ring's end
  BOOST_TEST(r.arrived(96));   // to the ring's end
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(r.offered(100));
  BOOST_TEST(!r.offered(100)); // a fifth pull in flight
  r.pull_landed();
  BOOST_TEST(r.offered(100));
}

BOOST_AUTO_TEST_CASE(a_writer_and_a_reader_move_every_byte_through_small_rings) {
  // Both windows together, as two streams run them, with random sizes, writes and pulls
  // completing in any order between the two kinds: every byte arrives once, in order,
  // and the writer never overruns the reader's ring.
  stream_writer_window w(5000);
  stream_reader_window r(7000);
  w.set_peer_ring(r.ring_size());
  r.set_peer_send_buffer(w.send_buffer_size());
  std::vector<std::size_t> writes; // posted, not completed
  std::vector<std::size_t> pulls; // offered, not landed
  std::uint64_t written = 0, read = 0, seed = 1;
  auto next = [&seed](std::size_t bound) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>(seed >> 33) % bound + 1;
  };
  for (int step = 0; step < 100000; ++step) {
    switch (next(4)) {
    case 1: {
      const std::size_t n = std::min(next(3000), w.room());
      w.copied(n);
      written += n;
      break;
    }
    case 2: {
      const auto p = w.next_post(next(2000));
      if (p.length == 0 || w.in_flight() == stream_writer_window::max_in_flight)
        break;
      if (next(2) == 1) { // written: the bytes are in the reader's ring
        w.posted(p.length);
        BOOST_REQUIRE(r.arrived(p.length));
        writes.push_back(p.length);
      } else { // left to pull: the reader reads them later
        w.posted(p.length, stream_writer_window::by::pull);
        BOOST_REQUIRE(r.offered(p.length));
        BOOST_REQUIRE_EQUAL(r.pull_source(p.length), p.local_offset);
        BOOST_REQUIRE_EQUAL(r.pull_target(p.length), p.remote_offset);
        pulls.push_back(p.length);
      }
      break;
    }
    case 3:
      if (!writes.empty() && next(2) == 1) {
        w.write_completed();
        writes.erase(writes.begin());
      } else if (!pulls.empty()) {
        r.pull_landed();
        BOOST_REQUIRE(w.pulled(pulls.front()));
        pulls.erase(pulls.begin());
      }
      break;
    default: {
      const std::size_t n = std::min(next(3000), r.available());
      r.consumed(n);
      read += n;
      if (const std::size_t credit = r.credit_due()) {
        r.credit_sent(credit);
        BOOST_REQUIRE(w.credit(credit));
      }
    }
    }
  }
  BOOST_TEST(read <= written);
  BOOST_TEST(written > 1000000u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wire_tests)

BOOST_AUTO_TEST_CASE(a_control_word_keeps_its_kind_and_value) {
  const auto w = wire::word(wire::kind::credit, 65536);
  BOOST_TEST(static_cast<int>(wire::kind_of(w)) == static_cast<int>(wire::kind::credit));
  BOOST_TEST(wire::value_of(w) == 65536u);
  const auto body = wire::encode_word(w);
  BOOST_TEST(wire::decode_word(body.data()) == w);
  BOOST_TEST(wire::value_of(wire::word(wire::kind::data, 64u << 20)) == 64u << 20);
}

BOOST_AUTO_TEST_CASE(an_advertisement_round_trips) {
  auto round_trip = [](const wire::advertisement& a) {
    const auto body = wire::encode(a);
    const auto b = wire::decode_advertisement(body.data(), body.size());
    BOOST_REQUIRE(b.has_value());
    BOOST_TEST(b->version == 2u);
    BOOST_TEST(b->address == a.address);
    BOOST_TEST(b->rkey == a.rkey);
    BOOST_TEST(b->ring_size == a.ring_size);
    BOOST_TEST(b->send_address == a.send_address);
    BOOST_TEST(b->send_rkey == a.send_rkey);
    BOOST_TEST(b->send_size == a.send_size);
  };
  wire::advertisement a;
  a.address = 0x7f0012345000ull;
  a.rkey = 0xabcdef01u;
  a.ring_size = 256 * 1024;
  round_trip(a); // no send buffer: size 0
  a.send_address = 0x7f0099990000ull;
  a.send_rkey = 0x1234u;
  a.send_size = 64 * 1024;
  round_trip(a);
}

BOOST_AUTO_TEST_CASE(messages_are_read_as_a_stream_sends_them) {
  using what = wire::message::what;
  const auto body = wire::encode_word(wire::word(wire::kind::credit, 300));
  // Immediate data: a data word on an RDMA write of that length; credit and end in
  // zero-length sends.
  auto m = wire::parse(wire::word(wire::kind::data, 100), true, 100, nullptr);
  BOOST_TEST((m.type == what::data && m.value == 100u));
  m = wire::parse(wire::word(wire::kind::credit, 5000), false, 0, nullptr);
  BOOST_TEST((m.type == what::credit && m.value == 5000u));
  m = wire::parse(wire::word(wire::kind::end, 0), false, 0, nullptr);
  BOOST_TEST((m.type == what::end));
  m = wire::parse(wire::word(wire::kind::pull, 16384), false, 0, nullptr);
  BOOST_TEST((m.type == what::pull && m.value == 16384u));
  m = wire::parse(wire::word(wire::kind::pulled, 16384), false, 0, nullptr);
  BOOST_TEST((m.type == what::pulled && m.value == 16384u));
  // iWARP: the word as a 4-byte body.
  m = wire::parse(std::nullopt, false, body.size(), body.data());
  BOOST_TEST((m.type == what::credit && m.value == 300u));
  // The advertisement: a 40-byte body.
  wire::advertisement a;
  a.ring_size = 8192;
  a.rkey = 7;
  const auto ad = wire::encode(a);
  m = wire::parse(std::nullopt, false, ad.size(), ad.data());
  BOOST_TEST((m.type == what::advertisement && m.advertised.ring_size == 8192u));
}

BOOST_AUTO_TEST_CASE(messages_no_stream_sends_are_malformed) {
  using what = wire::message::what;
  const std::array<std::byte, 32> zeros{};
  auto bad = [&](const std::optional<std::uint32_t>& imm, bool rdma_write, std::size_t size) {
    return wire::parse(imm, rdma_write, size, zeros.data()).type == what::malformed;
  };
  BOOST_TEST(bad(wire::word(wire::kind::data, 100), true, 99));   // announces more
  BOOST_TEST(bad(wire::word(wire::kind::credit, 1), true, 1));    // credit on a write
  BOOST_TEST(bad(wire::word(wire::kind::credit, 1), false, 4));   // immediate and a body
  BOOST_TEST(bad(wire::word(wire::kind::end, 1), false, 0));      // an end with a value
  BOOST_TEST(bad(wire::word(wire::kind::pull, 1), true, 1));      // a pull on a write
  BOOST_TEST(bad(wire::word(wire::kind::pull, 0), false, 0));     // nothing to pull
  BOOST_TEST(bad(wire::word(wire::kind::pulled, 0), false, 0));   // nothing pulled
  BOOST_TEST(bad(wire::word(wire::kind::credit, 0), false, 0));   // no credit
  BOOST_TEST(bad(wire::word(wire::kind::advertisement, 1), false, 0)); // not as a word
  BOOST_TEST(bad(7u << 28, false, 0));                            // unknown kind
  BOOST_TEST(bad(std::nullopt, true, 100));                       // a write without a word
  BOOST_TEST(bad(std::nullopt, false, 0));                        // an empty send
  BOOST_TEST(bad(std::nullopt, false, 5));                        // another size
  BOOST_TEST(bad(std::nullopt, false, 24));                       // 24 zero bytes
}

BOOST_AUTO_TEST_CASE(malformed_advertisements_are_refused) {
  wire::advertisement a;
  a.ring_size = 4096;
  auto body = wire::encode(a);
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size() - 1));
  a.ring_size = 4095; // too small
  body = wire::encode(a);
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
  a.ring_size = (64u << 20) + 1; // too large
  body = wire::encode(a);
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
  a.ring_size = 4096;
  body = wire::encode(a);
  body[0] = std::byte{3}; // another version
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
  body = wire::encode(a);
  body[23] = std::byte{1}; // the reserved bytes are not zero
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
  a.send_size = 4095; // a send buffer too small to be one
  body = wire::encode(a);
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
  a.send_size = 0; // none: allowed
  body = wire::encode(a);
  BOOST_TEST(wire::decode_advertisement(body.data(), body.size()).has_value());
  body[0] = std::byte{1}; // version 1 in version 2's length
  BOOST_TEST(!wire::decode_advertisement(body.data(), body.size()));
}

BOOST_AUTO_TEST_CASE(a_version_1_advertisement_is_read_as_one_without_a_send_buffer) {
  wire::advertisement a;
  a.ring_size = 8192;
  a.rkey = 9;
  a.send_size = 4096; // not in version 1's bytes
  auto body = wire::encode(a);
  body[0] = std::byte{1};
  const auto b = wire::decode_advertisement(body.data(), wire::advertisement_v1_size);
  BOOST_REQUIRE(b.has_value());
  BOOST_TEST(b->version == 1u);
  BOOST_TEST(b->ring_size == 8192u);
  BOOST_TEST(b->rkey == 9u);
  BOOST_TEST(b->send_size == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
