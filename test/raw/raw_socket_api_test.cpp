// raw_socket: what fails before any packet socket is opened (no privileges needed): option
// validation, unknown and non-Ethernet interfaces, a closed socket; what a user cannot change.
#define BOOST_TEST_MODULE raw_socket_api
#include <boost/test/unit_test.hpp>

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>

using namespace asio_rdma;
namespace asio = boost::asio;

BOOST_AUTO_TEST_CASE(out_of_range_options_are_rejected) {
  asio::io_context io;
  auto check = [&](raw_socket_options options) {
    error_code ec;
    auto socket = raw_socket::open(io.get_executor(), "lo", options, ec);
    BOOST_TEST(ec == errc::invalid_option);
    BOOST_TEST(!socket.is_open());
  };
  raw_socket_options o;
  o.send_buffers = 0;
  check(o);
  o = {};
  o.receive_buffers = 0;
  check(o);
  o = {};
  o.max_packet_size = 63;
  check(o);
  o = {};
  o.max_packet_size = 65537;
  check(o);
  o = {};
  o.max_flows = 0;
  check(o);
  o = {};
  o.max_flows = 65;
  check(o);
  o = {};
  o.backend = static_cast<raw_backend>(42);
  check(o);
}

BOOST_AUTO_TEST_CASE(unknown_interface_is_enodev) {
  asio::io_context io;
  error_code ec;
  raw_socket::open(io.get_executor(), "no-such-if0", {}, ec);
  BOOST_TEST(ec == boost::system::errc::no_such_device);
  raw_socket::open(io.get_executor(), "", {}, ec);
  BOOST_TEST(ec == boost::system::errc::no_such_device);
  raw_socket::open(io.get_executor(), "a-name-much-too-long-for-linux", {}, ec);
  BOOST_TEST(ec == boost::system::errc::no_such_device);
  try {
    raw_socket::open(io.get_executor(), "no-such-if0");
    BOOST_FAIL("no exception");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST(std::string(e.what()).find("no-such-if0") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(loopback_is_not_ethernet) {
  asio::io_context io;
  error_code ec;
  raw_socket::open(io.get_executor(), "lo", {}, ec);
  BOOST_TEST(ec == boost::system::errc::operation_not_supported);
}

BOOST_AUTO_TEST_CASE(operations_on_a_never_opened_socket_complete_with_bad_descriptor) {
  // Errors reach the handler, never thrown from the initiating function (it used to throw:
  // a never-opened socket has no executor to post to; the handler's own is used).
  asio::io_context io;
  raw_socket socket;
  int completed = 0;
  auto expect_bad_descriptor = [&](error_code ec, auto&&...) {
    BOOST_TEST(ec == asio::error::bad_descriptor);
    ++completed;
  };
  auto on_io = [&](auto handler) { return asio::bind_executor(io.get_executor(), handler); };
  BOOST_CHECK_NO_THROW(socket.async_receive(8, on_io(expect_bad_descriptor)));
  BOOST_CHECK_NO_THROW(socket.async_acquire(1, on_io(expect_bad_descriptor)));
  BOOST_CHECK_NO_THROW(socket.async_send(send_batch(), on_io(expect_bad_descriptor)));
  BOOST_CHECK_NO_THROW(socket.async_flush(on_io(expect_bad_descriptor)));
  BOOST_TEST(completed == 0); // posted, never inside the initiating function
  io.run();
  BOOST_TEST(completed == 4);
}

BOOST_AUTO_TEST_CASE(a_closed_socket_reports_bad_descriptor) {
  raw_socket socket;
  BOOST_TEST(!socket.is_open());
  error_code ec;
  socket.add_flow(flow_rule{}, ec);
  BOOST_TEST(ec == asio::error::bad_descriptor);
  socket.clear_flow(0, ec);
  BOOST_TEST(ec == asio::error::bad_descriptor);
  BOOST_CHECK_THROW(socket.caps(), boost::system::system_error);
  BOOST_CHECK_THROW(socket.set_flow(0, flow_rule{}), boost::system::system_error);
  flow_handle handle;
  BOOST_TEST(!handle.active());
  handle.remove(ec);
  BOOST_TEST(!ec);
  receive_batch batch;
  BOOST_TEST(batch.empty());
  batch.release();
  send_batch sends;
  sends.truncate(0);
  sends.release();
}

// A packet's buffer and which backend buffer it lends are the library's: a user who
// could rewrite them would make the backend index its buffer arrays with any number, or
// send from memory the NIC has not registered (issue 24: both backends used the id
// unchecked).
template <class Packet>
constexpr bool lent_buffer_is_writable =
    requires(Packet& p) { p.buffer_id = 1u; } || requires(Packet& p) { p.buffer_id_ = 1u; } ||
    requires(Packet& p, std::span<std::byte> other) { p.buffer = other; } ||
    requires(Packet& p, std::span<std::byte> other) { p.buffer_ = other; };

BOOST_AUTO_TEST_CASE(which_buffer_a_packet_lends_is_not_the_users_to_change) {
  BOOST_TEST(!lent_buffer_is_writable<asio_rdma::send_packet>);
  BOOST_TEST(!lent_buffer_is_writable<asio_rdma::received_packet>);
  // What is the user's: the bytes and the length to send.
  asio_rdma::send_packet packet;
  packet.length = 14;
  BOOST_TEST(packet.buffer().empty());
}
