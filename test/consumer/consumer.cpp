// A program that uses an installed asio-rdma, the way a user's project would:
// built by CMakeLists.txt (find_package) and by build_pkg_config.sh
// (pkg-config and a plain compiler), against a `cmake --install` prefix or
// the installed .deb.
//
// It needs no RDMA device: it runs asynchronous operations that the library
// completes with an error, through this program's io_context, and checks that
// the error codes compare equal across the library boundary (the library's
// categories and Asio's must be the program's own).
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/io_context.hpp>

#include <infiniband/verbs.h> // IBV_WC_WR_FLUSH_ERR: asio_rdma/error.hpp does not include it

#include <chrono>
#include <iostream>
#include <type_traits>

namespace asio = boost::asio;

int main() {
  asio::io_context io;
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    std::cout << (ok ? "ok: " : "FAILED: ") << what << '\n';
    failures += ok ? 0 : 1;
  };

  // A bad option is refused by the library; the handler is posted to our
  // io_context, never run inside the initiating call.
  asio_rdma::connection_options options;
  options.timeout = std::chrono::milliseconds(0);
  bool done = false;
  asio_rdma::error_code result;
  asio_rdma::async_connect(io.get_executor(), "127.0.0.1", 7471, options,
                           [&](asio_rdma::error_code ec, asio_rdma::connection) {
                             done = true;
                             result = ec;
                           });
  expect(!done, "the handler is not called inside async_connect");
  io.run();
  expect(done, "the handler ran in io_context::run");
  expect(result == asio_rdma::errc::invalid_option, "a zero timeout is errc::invalid_option");
  expect(&result.category() == &asio_rdma::rdma_category(), "the error is in rdma_category()");
  std::cout << "message: " << result.message() << '\n';

  // An error code the library makes from a work completion status compares
  // equal to the condition declared in the header.
  auto wc = asio_rdma::make_wc_error(IBV_WC_WR_FLUSH_ERR);
  expect(wc == asio_rdma::wc_condition::flushed, "IBV_WC_WR_FLUSH_ERR is wc_condition::flushed");

  // The umbrella header has every public header, the raw socket's too.
  asio_rdma::error_code mac_ec;
  const auto mac = asio_rdma::parse_mac_address("01:80:c2:00:00:00", mac_ec);
  expect(!mac_ec && mac.is_multicast(), "raw_socket.hpp and flow_rule.hpp come with asio_rdma.hpp");
  expect(std::is_move_constructible_v<asio_rdma::raw_socket>, "raw_socket is declared");

  std::cout << (failures == 0 ? "consumer: all checks passed\n" : "consumer: FAILED\n");
  return failures == 0 ? 0 : 1;
}
