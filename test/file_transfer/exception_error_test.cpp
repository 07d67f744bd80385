// What a file transfer's failed coroutine reports (lib/file_transfer/spawn_operation.hpp's
// exception_error), without a device: each exception's own error, and never a made-up
// "out of memory" for one that is not.
#define BOOST_TEST_MODULE exception_error
#include <boost/test/unit_test.hpp>

#include "../../lib/file_transfer/spawn_operation.hpp"

#include <boost/asio/error.hpp>

#include <cerrno>
#include <filesystem>
#include <new>
#include <stdexcept>

using asio_rdma::error_code;
using asio_rdma::detail::exception_error;

namespace {
template <typename Exception> error_code of(Exception e) {
  return exception_error(std::make_exception_ptr(std::move(e)));
}
} // namespace

BOOST_AUTO_TEST_CASE(a_system_error_gives_its_code) {
  BOOST_TEST((of(boost::system::system_error(boost::asio::error::connection_reset)) ==
              boost::asio::error::connection_reset));
}

BOOST_AUTO_TEST_CASE(a_filesystem_error_gives_its_code_not_enomem) {
  const auto ec = of(std::filesystem::filesystem_error(
      "create", std::make_error_code(std::errc::permission_denied)));
  BOOST_TEST(ec.value() == EACCES);
  BOOST_TEST((ec == boost::system::errc::permission_denied));
}

BOOST_AUTO_TEST_CASE(bad_alloc_is_out_of_memory) {
  BOOST_TEST(of(std::bad_alloc()).value() == ENOMEM);
}

BOOST_AUTO_TEST_CASE(anything_else_is_not_reported_as_out_of_memory) {
  const auto ec = of(std::logic_error("a defect"));
  BOOST_TEST(ec.value() == ENOTRECOVERABLE);
  BOOST_TEST(ec.value() != ENOMEM);
}
