// queue_pair_endpoint: the 40-byte encoding round-trips, and every malformed
// input is refused with errc::bad_endpoint (no device needed).
#define BOOST_TEST_MODULE unit_queue_pair_endpoint
#include <asio_rdma/queue_pair_endpoint.hpp>

#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

namespace ar = asio_rdma;

namespace {

ar::queue_pair_endpoint roce() {
  ar::queue_pair_endpoint e;
  e.qp_num = 0x123456;
  e.psn = 0xabcdef;
  e.port = 1;
  e.link_layer = 2;
  e.mtu = 4096;
  e.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  e.responder_resources = 16;
  e.initiator_depth = 8;
  return e;
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trip) {
  auto e = roce();
  BOOST_TEST(!e.check());
  auto bytes = e.to_bytes();
  BOOST_TEST(bytes.size() == 40u);
  BOOST_TEST(std::to_integer<int>(bytes[0]) == 'Q');
  // Network order: the QP number's most significant byte first.
  BOOST_TEST(std::to_integer<int>(bytes[5]) == 0x12);
  ar::error_code ec;
  auto back = ar::queue_pair_endpoint::from_bytes(bytes, ec);
  BOOST_TEST(!ec);
  BOOST_TEST((back == e));

  ar::queue_pair_endpoint ib;
  ib.qp_num = 7;
  ib.lid = 3;
  ib.link_layer = 1;
  ib.mtu = 2048;
  BOOST_TEST((ar::queue_pair_endpoint::from_bytes(ib.to_bytes()) == ib));
}

BOOST_AUTO_TEST_CASE(malformed_fields) {
  auto check = [](auto change) {
    auto e = roce();
    change(e);
    ar::error_code ec;
    BOOST_TEST((e.check() == ar::errc::bad_endpoint));
    ar::queue_pair_endpoint::from_bytes(e.to_bytes(), ec);
    BOOST_TEST((ec == ar::errc::bad_endpoint));
  };
  check([](auto& e) { e.qp_num = 0; });
  check([](auto& e) { e.mtu = 1500; });
  check([](auto& e) { e.link_layer = 3; });
  check([](auto& e) { e.gid = {}; }); // RoCE without a GID
  check([](auto& e) {
    e.link_layer = 1;
    e.lid = 0;
  }); // InfiniBand without a LID
  auto e = roce();
  e.qp_num = 0x1000000; // beyond 24 bits: to_bytes keeps it, check refuses
  BOOST_TEST((e.check() == ar::errc::bad_endpoint));
  e = roce();
  e.psn = 0x1000000;
  BOOST_TEST((e.check() == ar::errc::bad_endpoint));
}

BOOST_AUTO_TEST_CASE(malformed_bytes) {
  const auto good = roce().to_bytes();
  ar::error_code ec;
  for (std::size_t size : {0u, 1u, 39u}) {
    ar::queue_pair_endpoint::from_bytes(std::span(good).first(size), ec);
    BOOST_TEST((ec == ar::errc::bad_endpoint));
  }
  std::array<std::byte, 41> longer{};
  std::copy(good.begin(), good.end(), longer.begin());
  ar::queue_pair_endpoint::from_bytes(longer, ec);
  BOOST_TEST((ec == ar::errc::bad_endpoint));
  for (std::size_t at : {0u, 1u, 2u, 34u, 39u}) { // magic, version, reserved
    auto bytes = good;
    bytes[at] ^= std::byte{0x40};
    auto e = ar::queue_pair_endpoint::from_bytes(bytes, ec);
    BOOST_TEST((ec == ar::errc::bad_endpoint), "byte " << at);
    BOOST_TEST((e == ar::queue_pair_endpoint()));
  }
  BOOST_CHECK_THROW(ar::queue_pair_endpoint::from_bytes(std::span(good).first(3)),
                    boost::system::system_error);
  BOOST_TEST(ar::error_code(ar::errc::bad_endpoint).message() == "malformed queue pair endpoint");
}
