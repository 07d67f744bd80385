// Handles and options without a device: validation, moves, and operations on
// objects that are not open (which must fail cleanly, never crash or hang).
#define BOOST_TEST_MODULE handles
#include <boost/test/unit_test.hpp>

#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>

namespace ar = asio_rdma;
namespace asio = boost::asio;

BOOST_AUTO_TEST_CASE(default_options_are_valid_and_each_bad_value_is_named) {
  ar::connection_options o;
  BOOST_TEST(o.problem() == nullptr);
  BOOST_TEST(!o.validate());
  auto bad = [](auto change) {
    ar::connection_options x;
    change(x);
    return std::string(x.problem() ? x.problem() : "");
  };
  BOOST_TEST(bad([](auto& x) { x.send_queue_depth = 0; }).find("send_queue_depth") == 0u);
  BOOST_TEST(bad([](auto& x) { x.receive_queue_depth = 100000; }).find("receive_queue_depth") == 0u);
  BOOST_TEST(bad([](auto& x) { x.max_message_size = 0; }).find("max_message_size") == 0u);
  BOOST_TEST(bad([](auto& x) { x.max_message_size = (std::size_t(1) << 30) + 1; }).find("max_message_size") == 0u);
  BOOST_TEST(bad([](auto& x) { x.max_send_sge = 33; }).find("max_send_sge") == 0u);
  BOOST_TEST(bad([](auto& x) { x.max_inline_data = 4096; }).find("max_inline_data") == 0u);
  BOOST_TEST(bad([](auto& x) { x.timeout = std::chrono::milliseconds(0); }).find("timeout") == 0u);
  BOOST_TEST(bad([](auto& x) { x.private_data.resize(57); }).find("private_data") == 0u);
  ar::connection_options accept_side;
  accept_side.private_data.resize(196);
  BOOST_TEST(accept_side.problem(ar::connection_options::max_accept_private_data) == nullptr);
  BOOST_TEST((accept_side.validate() == ar::errc::invalid_option)); // too long to connect with
}

BOOST_AUTO_TEST_CASE(operations_on_a_connection_that_is_not_open_fail_cleanly) {
  asio::io_context io;
  ar::connection c;
  BOOST_TEST(!c.is_open());
  BOOST_TEST(c.native_handle() == nullptr);
  ar::connection moved(std::move(c));
  BOOST_TEST(!moved.is_open());
  ar::error_code send_ec, recv_ec, write_ec, disc_ec, advert_ec;
  std::array<char, 4> buf{};
  moved.async_send(asio::buffer(buf), asio::bind_executor(io, [&](auto ec, std::size_t) { send_ec = ec; }));
  moved.async_receive(asio::buffer(buf), asio::bind_executor(io, [&](auto ec, std::size_t) { recv_ec = ec; }));
  moved.async_write(ar::local_buffer{}, ar::remote_buffer{},
                    asio::bind_executor(io, [&](auto ec, std::size_t) { write_ec = ec; }));
  moved.async_disconnect(asio::bind_executor(io, [&](auto ec) { disc_ec = ec; }));
  // A composed operation: its 30 s timer must not be started (run() returns at once).
  moved.async_receive_remote_buffer(
      std::chrono::seconds(30),
      asio::bind_executor(io, [&](auto ec, ar::remote_buffer) { advert_ec = ec; }));
  BOOST_TEST(!send_ec); // never completed inside the initiating function
  BOOST_TEST(!advert_ec);
  const auto started = std::chrono::steady_clock::now();
  io.run();
  BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(5)));
  BOOST_TEST((send_ec == asio::error::not_connected));
  BOOST_TEST((recv_ec == asio::error::not_connected));
  BOOST_TEST((write_ec == asio::error::not_connected));
  BOOST_TEST((disc_ec == asio::error::not_connected));
  BOOST_TEST((advert_ec == asio::error::not_connected));
}

BOOST_AUTO_TEST_CASE(acceptor_that_does_not_listen_fails_cleanly) {
  asio::io_context io;
  ar::acceptor a(io.get_executor());
  BOOST_TEST(!a.is_open());
  ar::error_code ec;
  a.async_accept(asio::bind_executor(io, [&](auto e, ar::connection) { ec = e; }));
  io.run();
  BOOST_TEST((ec == asio::error::bad_descriptor), ec.message());
  ar::acceptor b(std::move(a));
  ar::acceptor_options o;
  a = std::move(b);
  a.listen("not an address", 1, o, ec);
  BOOST_TEST(ec.failed());
  // One moved from refuses clearly instead of crashing.
  b = std::move(a);
  a.listen("0.0.0.0", 0, o, ec);
  BOOST_TEST((ec == asio::error::bad_descriptor), ec.message());
  BOOST_CHECK_THROW(a.listen("0.0.0.0", 0, o), boost::system::system_error);
}

BOOST_AUTO_TEST_CASE(undecided_request_and_region_moves) {
  ar::connection_request r;
  BOOST_TEST(!r.is_pending());
  ar::error_code ec;
  r.reject({}, ec);
  BOOST_TEST((ec == asio::error::not_connected));
  ar::memory_region m1;
  ar::memory_region m2(std::move(m1));
  BOOST_TEST(!m2.is_registered());
  BOOST_TEST(m2.lkey() == 0u);
  ar::memory_region m3(nullptr, std::size_t(64), ar::access::local_write, ec);
  BOOST_TEST((ec == asio::error::invalid_argument)); // no protection domain
}
