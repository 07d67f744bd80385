#define BOOST_TEST_MODULE error
#include <boost/test/unit_test.hpp>

#include <asio_rdma/error.hpp>

// error.hpp is the one header every user's program reads: it must not bring
// in the verbs headers, nor an `asio` alias into namespace asio_rdma (which
// would clash with this declaration of a namespace of that name).
#ifdef INFINIBAND_VERBS_H
#error "asio_rdma/error.hpp includes <infiniband/verbs.h>"
#endif
namespace asio_rdma::asio {}

#include "../../../lib/error_message.hpp"
#include "../../../lib/verbs/verbs_error.hpp"

#include <infiniband/verbs.h>

namespace ar = asio_rdma;

BOOST_AUTO_TEST_CASE(errc_has_own_category_and_messages) {
  ar::error_code ec = ar::errc::rejected;
  BOOST_TEST(ec.category().name() == std::string("asio_rdma"));
  BOOST_TEST((ec.message() == "connection rejected by the peer"));
  BOOST_TEST((ec == ar::errc::rejected));
  BOOST_TEST((ec != ar::errc::message_too_large));
  for (int v = 1; v <= static_cast<int>(ar::errc::remote_failure); ++v)
    BOOST_TEST((ar::rdma_category().message(v).find("unknown") == std::string::npos));
}

// A refusal that names the device and the limit is still the plain errc to every
// comparison (tests and users write `ec == errc::device_limit_exceeded`).
BOOST_AUTO_TEST_CASE(errors_with_their_own_message_equal_the_plain_code) {
  const std::string text = "send queue depth 4096 exceeds siw0's maximum 1024 (max_qp_wr)";
  const ar::error_code ec = ar::detail::with_message(ar::errc::device_limit_exceeded, text);
  BOOST_TEST(ec.message() == text);
  BOOST_TEST((ec == ar::errc::device_limit_exceeded));
  BOOST_TEST((ec != ar::errc::operation_not_supported));
  BOOST_TEST((ec.category() == ar::rdma_category()));
  BOOST_TEST(ec.category().name() == std::string("asio_rdma"));
  BOOST_TEST(ec.category().message(static_cast<int>(ar::errc::rejected)) ==
             ar::rdma_category().message(static_cast<int>(ar::errc::rejected)));
  // The same message again is the same category: made once.
  const ar::error_code again = ar::detail::with_message(ar::errc::device_limit_exceeded, text);
  BOOST_TEST(&again.category() == &ec.category());
  const ar::error_code other =
      ar::detail::with_message(ar::errc::device_limit_exceeded, "another limit");
  BOOST_TEST(other.message() == "another limit");
  BOOST_TEST((other == ec)); // equal codes, whatever their text
  // Past the bound on distinct messages, the plain code: equal, with the plain message.
  ar::error_code last;
  for (int i = 0; i < 300; ++i)
    last = ar::detail::with_message(ar::errc::operation_not_supported, std::to_string(i));
  BOOST_TEST((last == ar::errc::operation_not_supported));
  BOOST_TEST(last.message() == ar::error_code(ar::errc::operation_not_supported).message());
}

BOOST_AUTO_TEST_CASE(wc_status_maps_to_conditions) {
  auto flush = ar::make_wc_error(IBV_WC_WR_FLUSH_ERR);
  BOOST_TEST((flush == ar::wc_condition::flushed));
  BOOST_TEST((flush != ar::wc_condition::remote));
  BOOST_TEST((flush.message() == std::string(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR))));
  BOOST_TEST((ar::make_wc_error(IBV_WC_REM_ACCESS_ERR) == ar::wc_condition::remote));
  BOOST_TEST((ar::make_wc_error(IBV_WC_LOC_LEN_ERR) == ar::wc_condition::local));
  BOOST_TEST((ar::make_wc_error(IBV_WC_RNR_RETRY_EXC_ERR) == ar::wc_condition::transport));
  BOOST_TEST((ar::make_wc_error(IBV_WC_RETRY_EXC_ERR) != ar::wc_condition::local));
}

BOOST_AUTO_TEST_CASE(errno_normalisation_compares_with_asio_errors) {
  BOOST_TEST(!ar::detail::from_returned_errno(0));
  BOOST_TEST((ar::detail::from_returned_errno(ECANCELED) == boost::asio::error::operation_aborted));
  errno = ETIMEDOUT;
  BOOST_TEST((ar::detail::from_minus_one(-1) == boost::asio::error::timed_out));
  BOOST_TEST(!ar::detail::from_minus_one(0));
  errno = 0;
  // A failure with errno unset must still read as a failure.
  BOOST_TEST((ar::detail::from_errno().value() == EIO));
  BOOST_TEST((ar::detail::from_negative_count(-1).value() == EIO));
  BOOST_TEST(!ar::detail::from_negative_count(3));
}
