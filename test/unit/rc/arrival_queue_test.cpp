// Received messages waiting for a receive (lib/rc/arrival_queue.hpp) without
// a device: what a completion says, arrival order across the ring's wrap,
// whether a message fits a receive's buffers, and the copy of a message over
// several buffers.
#include <boost/test/unit_test.hpp>

#include "rc/arrival_queue.hpp"

#include <array>
#include <numeric>

BOOST_AUTO_TEST_SUITE(arrival_queue_tests)

namespace {
using asio_rdma::detail::arrival_queue;
using asio_rdma::detail::arrived_message;

ibv_wc completion(std::uint32_t length, ibv_wc_opcode opcode = IBV_WC_RECV) {
  ibv_wc wc{};
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = opcode;
  wc.byte_len = length;
  return wc;
}
} // namespace

BOOST_AUTO_TEST_CASE(a_completion_gives_length_immediate_in_host_order_and_kind) {
  auto plain = arrived_message::from(7, completion(100));
  BOOST_TEST(plain.slot == 7u);
  BOOST_TEST(plain.length == 100u);
  BOOST_TEST(!plain.has_immediate);
  BOOST_TEST(plain.immediate == 0u);
  BOOST_TEST(!plain.rdma_write);

  auto with_imm = completion(8);
  with_imm.wc_flags = IBV_WC_WITH_IMM;
  with_imm.imm_data = htonl(0x01020304); // the device reports network order
  auto sent = arrived_message::from(3, with_imm);
  BOOST_TEST(sent.has_immediate);
  BOOST_TEST(sent.immediate == 0x01020304u);
  BOOST_TEST(!sent.rdma_write);

  auto write = completion(4096, IBV_WC_RECV_RDMA_WITH_IMM);
  write.wc_flags = IBV_WC_WITH_IMM;
  write.imm_data = htonl(42);
  auto written = arrived_message::from(0, write);
  BOOST_TEST(written.rdma_write);
  BOOST_TEST(written.immediate == 42u);
  BOOST_TEST(written.length == 4096u);
}

BOOST_AUTO_TEST_CASE(messages_leave_in_arrival_order_across_the_wrap) {
  arrival_queue q;
  q.reset(4);
  BOOST_TEST(q.empty());
  std::uint32_t next_in = 0, next_out = 0;
  // Fill and drain unevenly for several laps of the 4-entry ring.
  for (int round = 0; round < 10; ++round) {
    while (!q.full()) {
      q.push(arrived_message::from(next_in, completion(next_in + 1)));
      ++next_in;
    }
    BOOST_TEST(q.size() == 4u);
    for (int i = 0; i < 1 + round % 3 && !q.empty(); ++i) {
      BOOST_TEST(q.front().slot == next_out);
      BOOST_TEST(q.front().length == next_out + 1);
      q.pop();
      ++next_out;
    }
  }
  while (!q.empty()) {
    BOOST_TEST(q.front().slot == next_out++);
    q.pop();
  }
  BOOST_TEST(next_out == next_in);
  // reset() forgets what was waiting (a new connection's depth).
  q.push(arrived_message::from(1, completion(1)));
  q.reset(2);
  BOOST_TEST(q.empty());
}

BOOST_AUTO_TEST_CASE(a_message_is_copied_over_the_buffers_in_order) {
  std::array<std::byte, 10> message;
  for (std::size_t i = 0; i < message.size(); ++i)
    message[i] = std::byte(i + 1);
  std::array<std::byte, 3> a{};
  std::array<std::byte, 4> b{};
  std::array<std::byte, 8> c{};
  asio_rdma::detail::mutable_buffer_array dst;
  dst.items[0] = boost::asio::buffer(a);
  dst.items[1] = boost::asio::buffer(b);
  dst.items[2] = boost::asio::buffer(c);
  dst.count = 3;
  dst.total_size = a.size() + b.size() + c.size();
  asio_rdma::detail::scatter(message.data(), message.size(), dst);
  BOOST_TEST(std::to_integer<int>(a[0]) == 1);
  BOOST_TEST(std::to_integer<int>(a[2]) == 3);
  BOOST_TEST(std::to_integer<int>(b[0]) == 4);
  BOOST_TEST(std::to_integer<int>(b[3]) == 7);
  BOOST_TEST(std::to_integer<int>(c[0]) == 8);
  BOOST_TEST(std::to_integer<int>(c[2]) == 10);
  // Bytes past the message are left alone.
  BOOST_TEST(std::to_integer<int>(c[3]) == 0);
  BOOST_TEST(std::to_integer<int>(c[7]) == 0);
}

BOOST_AUTO_TEST_CASE(a_message_fits_buffers_as_large_or_needs_none) {
  asio_rdma::detail::mutable_buffer_array dst;
  dst.total_size = 8;
  BOOST_TEST(fits(arrived_message::from(0, completion(8)), dst));
  BOOST_TEST(!fits(arrived_message::from(0, completion(9)), dst));
  // An RDMA write with immediate brings no bytes to copy, whatever its length.
  BOOST_TEST(fits(arrived_message::from(0, completion(4096, IBV_WC_RECV_RDMA_WITH_IMM)), dst));
}

BOOST_AUTO_TEST_SUITE_END()
