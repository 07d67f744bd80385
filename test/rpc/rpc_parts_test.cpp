// The RPC layer's parts without I/O: frames, the call table (ids, stale replies, cancel
// races), the frame writer's batches, endpoints.
#define BOOST_TEST_MODULE rpc_parts
#include <boost/test/unit_test.hpp>

#include "rpc/call_table.hpp"
#include "rpc/frame_reader.hpp"
#include "rpc/frame_writer.hpp"
#include "rpc/rpc_wire.hpp"

#include <asio_rdma/rpc/method_id.hpp>
#include <asio_rdma/rpc/options.hpp>

#include <set>

namespace rpc = asio_rdma::rpc;
namespace wire = asio_rdma::rpc::wire;

BOOST_AUTO_TEST_SUITE(rpc_wire_tests)

BOOST_AUTO_TEST_CASE(a_header_reads_back_as_written) {
  wire::frame_header h{wire::frame_kind::request, 123456, 0x1122334455667788ull, 0xdeadbeef, 2500};
  wire::header_bytes b;
  wire::encode(h, b);
  BOOST_TEST(std::to_integer<int>(b[0]) == 0x52);
  BOOST_TEST(std::to_integer<int>(b[4]) == 0x40); // 123456 little-endian: 40 e2 01 00
  wire::frame_header r;
  BOOST_TEST(!wire::parse(b, r));
  BOOST_TEST((r.kind == h.kind && r.length == h.length && r.call_id == h.call_id &&
              r.word == h.word && r.deadline_ms == h.deadline_ms));
}

BOOST_AUTO_TEST_CASE(malformed_headers_are_protocol_errors) {
  auto bad = [](auto mutate) {
    wire::header_bytes b;
    wire::encode({wire::frame_kind::request, 1, 9, 1, 0}, b);
    mutate(b);
    wire::frame_header r;
    return wire::parse(b, r) == rpc::errc::protocol_error;
  };
  BOOST_TEST(bad([](auto& b) { b[0] = std::byte{0}; }));
  BOOST_TEST(bad([](auto& b) { b[1] = std::byte{0}; }));
  BOOST_TEST(bad([](auto& b) { b[2] = std::byte{0}; }));
  BOOST_TEST(bad([](auto& b) { b[2] = std::byte{7}; }));
  BOOST_TEST(bad([](auto& b) { b[2] = std::byte{6}; }));                            // release + payload
  BOOST_TEST(bad([](auto& b) { b[3] = std::byte{1}; }));                            // flags
  BOOST_TEST(bad([](auto& b) { b[2] = std::byte{5}; }));                            // cancel + payload
  BOOST_TEST(bad([](auto& b) { std::fill(b.begin() + 8, b.begin() + 16, std::byte{0}); })); // id 0
}

BOOST_AUTO_TEST_CASE(bulk_frames_carry_a_descriptor_and_only_requests_and_replies_are_bulk) {
  auto parses = [](wire::frame_kind kind, std::uint32_t length, std::byte flags) {
    wire::header_bytes b;
    wire::encode({kind, length, 9, 1, 0}, b);
    b[3] = flags;
    wire::frame_header r;
    return !wire::parse(b, r) && r.flags == std::to_integer<std::uint8_t>(flags);
  };
  const std::uint32_t descriptor = asio_rdma::remote_buffer::encoded_size;
  BOOST_TEST(parses(wire::frame_kind::request, descriptor, std::byte{1}));
  BOOST_TEST(parses(wire::frame_kind::reply, descriptor, std::byte{1}));
  BOOST_TEST(!parses(wire::frame_kind::request, descriptor + 1, std::byte{1})); // not a descriptor
  BOOST_TEST(!parses(wire::frame_kind::error, descriptor, std::byte{1}));
  BOOST_TEST(!parses(wire::frame_kind::cancel, 0, std::byte{1}));
  BOOST_TEST(!parses(wire::frame_kind::request, descriptor, std::byte{8})); // unknown flag
  BOOST_TEST(parses(wire::frame_kind::release, 0, std::byte{0}));
  BOOST_TEST(!parses(wire::frame_kind::release, 1, std::byte{0}));
  // A reply buffer's descriptor ends a request: after its bytes, or after its own.
  BOOST_TEST(parses(wire::frame_kind::request, descriptor, std::byte{2}));
  BOOST_TEST(parses(wire::frame_kind::request, descriptor + 100, std::byte{2}));
  BOOST_TEST(!parses(wire::frame_kind::request, descriptor - 1, std::byte{2}));
  BOOST_TEST(parses(wire::frame_kind::request, 2 * descriptor, std::byte{3}));
  BOOST_TEST(!parses(wire::frame_kind::request, descriptor, std::byte{3}));
  BOOST_TEST(!parses(wire::frame_kind::reply, descriptor, std::byte{2}));
  // A written reply has no payload, and only a reply is one.
  BOOST_TEST(parses(wire::frame_kind::reply, 0, std::byte{4}));
  BOOST_TEST(!parses(wire::frame_kind::reply, 1, std::byte{4}));
  BOOST_TEST(!parses(wire::frame_kind::request, 0, std::byte{4}));
  BOOST_TEST(!parses(wire::frame_kind::reply, descriptor, std::byte{5}));
  // set_payload turns an encoded request into a bulk one.
  wire::header_bytes b;
  wire::encode({wire::frame_kind::request, 1 << 20, 9, 1, 0}, b);
  wire::set_payload(b, wire::flag_bulk, descriptor);
  wire::frame_header r;
  BOOST_TEST(!wire::parse(b, r));
  BOOST_TEST((r.flags == wire::flag_bulk && r.length == descriptor && r.word == 1u));
}

BOOST_AUTO_TEST_CASE(error_words_name_errors) {
  BOOST_TEST(wire::error_of(unsigned(rpc::errc::unknown_method)) == rpc::errc::unknown_method);
  BOOST_TEST(wire::error_of(0) == rpc::errc::protocol_error);
  BOOST_TEST(wire::error_of(1000) == rpc::errc::protocol_error);
}

BOOST_AUTO_TEST_CASE(method_ids_are_fnv1a) {
  static_assert(rpc::method_id("") == 2166136261u);
  BOOST_TEST(rpc::method_id("a") == 0xe40c292cu);
  BOOST_TEST(rpc::method_id("kv.get") != rpc::method_id("kv.put"));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
struct test_call {
  std::uint32_t generation = 1;
  bool in_use = false;
  int value = 0;
};
using table = rpc::detail::call_table<test_call>;
} // namespace

BOOST_AUTO_TEST_SUITE(call_table_tests)

BOOST_AUTO_TEST_CASE(ids_find_their_calls_and_nothing_once_released) {
  table t;
  auto [a, ca] = t.acquire([] { return test_call{}; });
  auto [b, cb] = t.acquire([] { return test_call{}; });
  BOOST_TEST(a != b);
  BOOST_TEST(a != 0u);
  BOOST_TEST(t.find(a) == ca);
  BOOST_TEST(t.find(b) == cb);
  t.release(a);
  BOOST_TEST(t.find(a) == nullptr); // a reply after the call ended
  auto [c, cc] = t.acquire([] { return test_call{}; });
  BOOST_TEST(cc == ca);             // the slot is reused...
  BOOST_TEST(c != a);               // ...under another id
  BOOST_TEST(t.find(a) == nullptr); // the stale id still finds nothing
  BOOST_TEST(t.find(c) == cc);
  BOOST_TEST(t.find(0) == nullptr);
  BOOST_TEST(t.find(table::id_of(999, 1)) == nullptr);
  BOOST_TEST(t.in_use() == 2u);
}

BOOST_AUTO_TEST_CASE(a_cancel_after_the_reply_finds_nothing) {
  table t;
  auto [id, c] = t.acquire([] { return test_call{}; });
  t.release(id); // the reply came and completed the call
  BOOST_TEST(t.find(id) == nullptr); // the cancellation that raced it does nothing
}

BOOST_AUTO_TEST_CASE(the_table_stops_growing_at_the_most_in_flight) {
  table t;
  std::vector<std::uint64_t> ids;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 64; ++i)
      ids.push_back(t.acquire([] { return test_call{}; }).first);
    for (auto id : ids)
      t.release(id);
    ids.clear();
  }
  BOOST_TEST(t.capacity() == 64u);
  BOOST_TEST(t.in_use() == 0u);
}

BOOST_AUTO_TEST_CASE(generations_wrap_past_zero) {
  table t;
  auto [id, c] = t.acquire([] { return test_call{}; });
  c->generation = 0xffffffffu;
  t.release(table::id_of(0, 0xffffffffu));
  auto [again, c2] = t.acquire([] { return test_call{}; });
  BOOST_TEST(c2->generation == 1u);
  BOOST_TEST(again == table::id_of(0, 1));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(frame_writer_tests)

using rpc::detail::frame_writer;
using rpc::detail::outgoing_frame;

BOOST_AUTO_TEST_CASE(frames_queued_while_writing_go_out_together) {
  frame_writer w;
  std::vector<outgoing_frame> f(40);
  std::array<std::byte, 10> payload{};
  for (auto& x : f)
    x.payload = boost::asio::buffer(payload);
  f[1].payload = {}; // header only
  w.push(f[0]);
  auto first = w.start_batch();
  BOOST_TEST(first.size() == 2u);
  BOOST_TEST(w.writing());
  for (int i = 1; i < 40; ++i)
    w.push(f[i]);
  BOOST_TEST(w.finish_batch() == &f[0]);
  auto second = w.start_batch();
  BOOST_TEST(second.size() == 2 * frame_writer::max_batch - 1); // f[1] has no payload
  int n = 0;
  for (auto* p = w.finish_batch(); p; p = p->next)
    ++n;
  BOOST_TEST(n == int(frame_writer::max_batch));
  BOOST_TEST(w.has_queued());
}

BOOST_AUTO_TEST_CASE(a_queued_frame_can_be_withdrawn_a_written_one_not) {
  frame_writer w;
  outgoing_frame a, b, c;
  w.push(a);
  w.push(b);
  w.push(c);
  BOOST_TEST(w.withdraw(b));
  BOOST_TEST(!w.withdraw(b));
  w.start_batch();
  BOOST_TEST(!w.withdraw(a)); // being written
  auto* list = w.finish_batch();
  BOOST_TEST(list == &a);
  BOOST_TEST(list->next == &c);
  BOOST_TEST(!w.has_queued());
  w.push(b);
  BOOST_TEST(w.withdraw(b));
  BOOST_TEST(!w.has_queued());
  w.push(c); // the tail was fixed up
  BOOST_TEST(w.has_queued());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(frame_reader_tests)

namespace rd = asio_rdma::rpc::detail;

// Frames of 0..300 payload bytes, as a peer writes them back to back.
std::vector<std::byte> frames_in_a_row(int n) {
  std::vector<std::byte> out;
  for (int i = 0; i < n; ++i) {
    wire::header_bytes h;
    const std::uint32_t len = static_cast<std::uint32_t>(i * 37 % 301);
    wire::encode({wire::frame_kind::reply, len, std::uint64_t(i + 1), 0, 0}, h);
    out.insert(out.end(), h.begin(), h.end());
    for (std::uint32_t k = 0; k < len; ++k)
      out.push_back(static_cast<std::byte>(i + k));
  }
  return out;
}

BOOST_AUTO_TEST_CASE(frames_split_anywhere_read_back_whole) {
  const auto bytes = frames_in_a_row(200);
  for (std::size_t piece : {1u, 7u, 23u, 24u, 25u, 100u, 4096u}) {
    rd::frame_reader reader(512); // smaller than some reads would fill: it wraps often
    std::size_t fed = 0, reads = 0;
    int frames = 0;
    bool in_payload = false;
    wire::frame_header h;
    std::vector<std::byte> payload;
    std::size_t have = 0;
    while (frames < 200) {
      if (!in_payload) {
        boost::system::error_code bad;
        if (reader.next_header(h, bad)) {
          BOOST_REQUIRE(!bad);
          BOOST_REQUIRE(h.call_id == std::uint64_t(frames + 1));
          payload.assign(h.length, std::byte{0xee});
          have = 0;
          in_payload = true;
          continue;
        }
      } else {
        have += reader.take(std::span(payload).subspan(have));
        if (have == payload.size()) {
          for (std::size_t k = 0; k < payload.size(); ++k)
            BOOST_REQUIRE(payload[k] == static_cast<std::byte>(frames + k));
          ++frames;
          in_payload = false;
          continue;
        }
      }
      // The peer's next bytes, as many as fit and as the piece allows.
      auto room = reader.space();
      BOOST_REQUIRE(room.size() >= wire::header_size);
      const std::size_t n = std::min({room.size(), piece, bytes.size() - fed});
      BOOST_REQUIRE(n > 0);
      std::memcpy(room.data(), bytes.data() + fed, n);
      reader.commit(n);
      fed += n;
      ++reads;
    }
    BOOST_TEST(fed == bytes.size());
    BOOST_TEST(reader.buffered() == 0u);
    BOOST_TEST_MESSAGE(piece << " B pieces: " << reads << " reads");
  }
}

BOOST_AUTO_TEST_CASE(skipped_bytes_and_a_malformed_header) {
  rd::frame_reader reader(64);
  const auto bytes = frames_in_a_row(3); // payloads 0, 37, 74 bytes
  auto room = reader.space();
  std::memcpy(room.data(), bytes.data(), 64);
  reader.commit(64);
  wire::frame_header h;
  boost::system::error_code bad;
  BOOST_REQUIRE(reader.next_header(h, bad));
  BOOST_TEST(h.length == 0u);
  BOOST_REQUIRE(reader.next_header(h, bad));
  BOOST_TEST(h.length == 37u);
  BOOST_TEST(reader.skip(37) == 16u); // what is buffered of it
  BOOST_TEST(reader.buffered() == 0u);
  wire::header_bytes garbage;
  garbage.fill(std::byte{0x5a});
  room = reader.space();
  std::memcpy(room.data(), garbage.data(), garbage.size());
  reader.commit(garbage.size());
  BOOST_REQUIRE(reader.next_header(h, bad));
  BOOST_TEST(bad == asio_rdma::rpc::errc::protocol_error);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(endpoint_tests)

BOOST_AUTO_TEST_CASE(urls_parse_or_are_refused) {
  auto e = rpc::endpoint::parse("rdma://10.0.0.1:7471");
  BOOST_TEST(e.has_value());
  BOOST_TEST((e->transport == rpc::transport_kind::rdma && e->host == "10.0.0.1" && e->port == 7471));
  auto v6 = rpc::endpoint::parse("tcp://[::1]:80");
  BOOST_TEST((v6 && v6->host == "::1" && v6->port == 80));
  for (const char* bad : {"tcp://::1:80", "tcp://host", "tcp://:80", "tcp://h:", "tcp://h:70000",
                          "tcp://h:8x", "http://h:80", "rdma:/h:80", "tcp://[]:1"})
    BOOST_TEST(!rpc::endpoint::parse(bad).has_value(), bad);
}

BOOST_AUTO_TEST_SUITE_END()
