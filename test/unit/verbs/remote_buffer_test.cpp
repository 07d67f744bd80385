#define BOOST_TEST_MODULE remote_buffer
#include <boost/test/unit_test.hpp>

#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

namespace ar = asio_rdma;

BOOST_AUTO_TEST_CASE(encoding_round_trips_in_network_byte_order) {
  ar::remote_buffer rb{0x0102030405060708ull, 0xa1b2c3d4u, 0x1122334455667788ull};
  auto bytes = rb.encode();
  BOOST_TEST(bytes.size() == 24u);
  BOOST_TEST(int(bytes[0]) == 1);                 // version
  BOOST_TEST(int(bytes[4]) == 0xa1);              // rkey, big-endian
  BOOST_TEST(int(bytes[8]) == 0x01);              // address, big-endian
  BOOST_TEST(int(bytes[23]) == 0x88);             // length, big-endian
  ar::error_code ec;
  auto back = ar::remote_buffer::decode(bytes, ec);
  BOOST_TEST(!ec);
  BOOST_TEST((back == rb));
}

BOOST_AUTO_TEST_CASE(truncated_or_foreign_advertisements_are_protocol_errors) {
  auto bytes = ar::remote_buffer{1, 2, 3}.encode();
  ar::error_code ec;
  ar::remote_buffer::decode(std::span(bytes).first(23), ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
  bytes[0] = std::byte{2};
  ar::remote_buffer::decode(bytes, ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
  bytes[0] = std::byte{1};
  bytes[2] = std::byte{7};
  ar::remote_buffer::decode(bytes, ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
}

BOOST_AUTO_TEST_CASE(remote_slices_are_bounds_checked) {
  ar::remote_buffer rb{1000, 7, 100};
  auto s = rb.slice(10, 20);
  BOOST_TEST(s.address == 1010u);
  BOOST_TEST(s.length == 20u);
  BOOST_TEST(rb.slice(90, 11).length == 0u);
  BOOST_TEST(rb.slice(101, 0).length == 0u);
  BOOST_TEST(rb.slice(100, 0).address == 1100u);
}

BOOST_AUTO_TEST_CASE(local_slices_of_an_empty_region_are_bounds_checked) {
  ar::memory_region none;
  BOOST_TEST(!none.is_registered());
  BOOST_TEST(none.slice().in_bounds);
  BOOST_TEST(none.slice().length == 0u);
  BOOST_TEST(!none.slice(1, 0).in_bounds);
  BOOST_TEST(ar::has(ar::access::all, ar::access::remote_atomic));
  BOOST_TEST(!ar::has(ar::access::remote_read, ar::access::remote_write));
}
