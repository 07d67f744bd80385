// The verbs backend on a device without raw packet queue pairs (SoftRoCE) fails with a clear
// error instead of crashing or hanging. Run where rdma_rxe is loaded (the SoftRoCE VM);
// ASIO_RDMA_RAW_IFACE names the netdev under rxe0 (default veth0).
#define BOOST_TEST_MODULE raw_verbs_softroce
#include <boost/test/unit_test.hpp>

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdlib>

using namespace asio_rdma;

BOOST_AUTO_TEST_CASE(verbs_backend_on_softroce_fails_with_a_clear_error) {
  const char* env = std::getenv("ASIO_RDMA_RAW_IFACE");
  const std::string interface = env && *env ? env : "veth0";
  boost::asio::io_context io;
  raw_socket_options options;
  options.backend = raw_backend::verbs;
  error_code ec;
  auto socket = raw_socket::open(io.get_executor(), interface, options, ec);
  BOOST_TEST_MESSAGE("open(" << interface << ", verbs): " << ec.message());
  BOOST_TEST((ec == errc::raw_packet_unsupported || ec == errc::no_device), ec.message());
  BOOST_TEST(!socket.is_open());

  // The automatic backend is the packet backend (docs/raw_socket.md says why).
  options.backend = raw_backend::automatic;
  auto fallback = raw_socket::open(io.get_executor(), interface, options, ec);
  BOOST_TEST(!ec, ec.message());
  if (fallback.is_open())
    BOOST_TEST((fallback.caps().backend == raw_backend::packet));
}
