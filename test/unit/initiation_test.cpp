// Every asynchronous operation hands async_initiate a named initiation object that carries
// the I/O object's executor (as Asio's initiate_async_send), so a completion token can ask it
// for that executor. Checked without a device: a token that only looks at the initiation
// and never starts the operation.
#define BOOST_TEST_MODULE initiation
#include <boost/test/unit_test.hpp>

#include <asio_rdma/acceptor.hpp>
#include <asio_rdma/connect.hpp>
#include <asio_rdma/connection.hpp>
#include <asio_rdma/datagram_socket.hpp>
#include <asio_rdma/file_transfer.hpp>
#include <asio_rdma/raw_socket.hpp>
#include <asio_rdma/stream.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>

#include <array>
#include <optional>
#include <typeindex>

namespace asio = boost::asio;

namespace {

/// A completion token that records the initiation it is given and starts nothing.
struct peek_t {};
struct peeked {
  std::optional<asio::any_io_executor> executor;
  std::optional<std::type_index> initiation;
};
peeked last;

} // namespace

template <typename Signature> struct boost::asio::async_result<peek_t, Signature> {
  template <typename Initiation, typename... Args>
  static void initiate(Initiation&& initiation, peek_t, Args&&...) {
    last.executor = initiation.get_executor();
    last.initiation = typeid(std::decay_t<Initiation>);
  }
};

namespace {

template <typename Expected> void check(const asio::any_io_executor& executor) {
  BOOST_TEST_REQUIRE(last.initiation.has_value());
  BOOST_TEST((*last.initiation == typeid(Expected)));
  BOOST_TEST_REQUIRE(last.executor.has_value());
  BOOST_TEST((*last.executor == executor));
  last = {};
}

} // namespace

BOOST_AUTO_TEST_CASE(acceptor_operations_carry_the_acceptors_executor) {
  asio::io_context io;
  asio_rdma::acceptor acceptor(io.get_executor()); // not listening: no device needed
  acceptor.async_accept(peek_t{});
  check<asio_rdma::detail::initiate_async_accept>(io.get_executor());
  acceptor.async_accept_request(peek_t{});
  check<asio_rdma::detail::initiate_async_accept_request>(io.get_executor());
}

BOOST_AUTO_TEST_CASE(async_connect_carries_the_executor_it_was_given) {
  asio::io_context io;
  asio_rdma::async_connect(io.get_executor(), "192.0.2.1", 7000, {}, peek_t{});
  check<asio_rdma::detail::initiate_async_connect>(io.get_executor());
}

BOOST_AUTO_TEST_CASE(connection_operations_name_their_initiation) {
  // A connection that is not open has no executor; each operation still has its type.
  asio_rdma::connection conn;
  std::array<std::byte, 8> bytes{};
  const asio::any_io_executor none;
  conn.async_send(asio::buffer(bytes), peek_t{});
  check<asio_rdma::detail::initiate_async_send>(none);
  conn.async_receive(asio::buffer(bytes), peek_t{});
  check<asio_rdma::detail::initiate_async_receive>(none);
  conn.async_receive_message(asio::buffer(bytes), peek_t{});
  check<asio_rdma::detail::initiate_async_receive_message>(none);
  conn.async_write(asio_rdma::local_buffer(), asio_rdma::remote_buffer(), peek_t{});
  check<asio_rdma::detail::initiate_async_work>(none);
  conn.async_fetch_add(asio_rdma::remote_buffer(), 1, peek_t{});
  check<asio_rdma::detail::initiate_async_work>(none);
  const std::array<asio_rdma::batch_entry, 1> entries{
      asio_rdma::batch_entry::send(asio_rdma::local_buffer())};
  conn.async_batch(entries, peek_t{});
  check<asio_rdma::detail::initiate_async_batch>(none);
  conn.async_send_remote_buffer(asio_rdma::remote_buffer(), peek_t{});
  check<asio_rdma::detail::initiate_async_send_remote_buffer>(none);
  conn.async_disconnect(peek_t{});
  check<asio_rdma::detail::initiate_async_disconnect>(none);
  asio_rdma::async_send_file(conn, "nothing", {}, peek_t{});
  check<asio_rdma::detail::initiate_async_send_paths>(none);
}

BOOST_AUTO_TEST_CASE(raw_socket_operations_name_their_initiation) {
  // A raw socket never opened has no executor; each operation still has its type.
  asio_rdma::raw_socket socket;
  const asio::any_io_executor none;
  socket.async_receive(8, peek_t{});
  check<asio_rdma::detail::initiate_async_raw_receive>(none);
  socket.async_acquire(1, peek_t{});
  check<asio_rdma::detail::initiate_async_raw_acquire>(none);
  socket.async_send(asio_rdma::send_batch(), peek_t{});
  check<asio_rdma::detail::initiate_async_raw_send>(none);
  socket.async_flush(peek_t{});
  check<asio_rdma::detail::initiate_async_raw_flush>(none);
}

BOOST_AUTO_TEST_CASE(stream_operations_name_their_initiation) {
  // A stream that is not open has no executor; each operation still has its type.
  asio_rdma::stream stream;
  std::array<std::byte, 8> bytes{};
  const asio::any_io_executor none;
  stream.async_read_some(asio::buffer(bytes), peek_t{});
  check<asio_rdma::detail::initiate_stream_read>(none);
  stream.async_write_some(asio::buffer(bytes), peek_t{});
  check<asio_rdma::detail::initiate_stream_write>(none);
  stream.async_shutdown(peek_t{});
  check<asio_rdma::detail::initiate_stream_shutdown>(none);
  asio::io_context io;
  asio_rdma::async_connect_stream(io.get_executor(), "192.0.2.1", 7000, {}, peek_t{});
  check<asio_rdma::detail::initiate_connect_stream>(io.get_executor());
  asio_rdma::acceptor acceptor(io.get_executor());
  acceptor.async_accept_stream(peek_t{});
  check<asio_rdma::detail::initiate_accept_stream>(io.get_executor());
}
