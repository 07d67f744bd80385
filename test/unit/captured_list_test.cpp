// What an initiation captures of a caller's list (include/asio_rdma/detail/buffer_array.hpp
// and work_request.hpp), without a device: empty buffers are dropped, the total size is
// summed, a list longer than the capture is flagged (the operation then fails with
// invalid_argument) rather than cut silently, and a work request's view points at the
// capture's own copy, not at the caller's list.
#define BOOST_TEST_MODULE captured_list
#include <boost/test/unit_test.hpp>

#include <asio_rdma/detail/buffer_array.hpp>
#include <asio_rdma/detail/work_request.hpp>

#include <array>
#include <vector>

namespace detail = asio_rdma::detail;

BOOST_AUTO_TEST_CASE(a_buffer_sequence_keeps_its_non_empty_buffers_and_their_total) {
  std::array<char, 3> a{};
  std::array<char, 5> b{};
  std::vector<boost::asio::const_buffer> sequence{boost::asio::buffer(a), boost::asio::const_buffer(),
                                                  boost::asio::buffer(b)};
  auto captured = detail::capture_buffers<boost::asio::const_buffer>(sequence);
  auto view = captured.view();
  BOOST_TEST(view.count == 2u);
  BOOST_TEST(view.total_size == 8u);
  BOOST_TEST(!view.too_many);
  BOOST_TEST(view.items[0].data() == a.data());
  BOOST_TEST(view.items[1].data() == b.data());
}

BOOST_AUTO_TEST_CASE(one_buffer_is_carried_by_value_and_an_empty_one_counts_as_none) {
  std::array<char, 4> a{};
  auto one = detail::capture_buffers<boost::asio::mutable_buffer>(boost::asio::buffer(a));
  static_assert(sizeof(one) == sizeof(boost::asio::mutable_buffer));
  BOOST_TEST(one.view().count == 1u);
  BOOST_TEST(one.view().total_size == 4u);
  auto none = detail::capture_buffers<boost::asio::mutable_buffer>(boost::asio::mutable_buffer());
  BOOST_TEST(none.view().count == 0u);
}

BOOST_AUTO_TEST_CASE(more_buffers_than_the_capture_holds_are_flagged_not_cut) {
  std::array<char, 1> byte{};
  std::vector<boost::asio::const_buffer> sequence(detail::max_buffers + 1, boost::asio::buffer(byte));
  auto view = detail::capture_buffers<boost::asio::const_buffer>(sequence).view();
  BOOST_TEST(view.too_many);
  BOOST_TEST(view.count == detail::max_buffers);
  BOOST_TEST(view.total_size == detail::max_buffers);
}

BOOST_AUTO_TEST_CASE(a_buffer_array_copies_a_view_in) {
  std::array<char, 6> a{};
  auto source = detail::capture_buffers<boost::asio::mutable_buffer>(boost::asio::buffer(a));
  detail::mutable_buffer_array copy;
  copy.assign(source.view());
  BOOST_TEST(copy.count == 1u);
  BOOST_TEST(copy.total_size == 6u);
  BOOST_TEST(copy.items[0].data() == a.data());
}

BOOST_AUTO_TEST_CASE(a_work_request_points_at_the_capture_not_the_callers_list) {
  detail::captured_list<asio_rdma::local_buffer, 2> local;
  {
    std::vector<asio_rdma::local_buffer> callers(1);
    callers[0].length = 42;
    for (const auto& b : callers)
      local.push_back(b);
  } // the caller's list is gone, as when a deferred operation starts later
  auto request = detail::with_local(detail::work_request{}, local);
  BOOST_TEST(request.local.items == local.items.data());
  BOOST_TEST(request.local.count == 1u);
  BOOST_TEST(request.local.items[0].length == 42u);

  local.push_back({});
  local.push_back({}); // a third into a capture of two
  BOOST_TEST(detail::with_local(detail::work_request{}, local).local.too_many);

  detail::captured_list<asio_rdma::local_buffer, 0> atomics; // atomics carry no local buffer
  BOOST_TEST(detail::with_local(detail::work_request{}, atomics).local.count == 0u);
}
