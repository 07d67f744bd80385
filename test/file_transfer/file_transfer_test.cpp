// The file transfer on a real device: single files of awkward sizes, a tree,
// chunk negotiation, hostile and vanishing peers, timeouts and stop().
#define BOOST_TEST_MODULE integration_file_transfer
#include "rdma_test.hpp"

#include <asio_rdma/detail/file_protocol.hpp>
#include <asio_rdma/file_transfer.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdlib.h>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace proto = asio_rdma::detail::file_protocol;
using ar::test::device_address;
using asio::awaitable;
using asio::use_awaitable;

/// ar::test::run, usable again on an io_context that ran out of work before.
template <typename Body> void run(asio::io_context& io, Body body) {
  io.restart();
  ar::test::run(io, std::move(body));
}

namespace {

/// A fresh directory under /tmp, removed with everything in it.
struct temp_dir {
  fs::path path;
  temp_dir() {
    char name[] = "/tmp/asio_rdma_ft_XXXXXX";
    BOOST_REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file(const fs::path& p, std::size_t size, std::uint64_t seed) {
  fs::create_directories(p.parent_path());
  std::vector<char> data(size);
  for (std::size_t i = 0; i < size; ++i)
    data[i] = static_cast<char>(ar::test::pattern(seed, i));
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(size));
}

std::vector<char> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool same_file(const fs::path& a, const fs::path& b) {
  return fs::exists(a) && fs::exists(b) && read_file(a) == read_file(b);
}

/// Every entry below `dir`, relative, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(e.path().lexically_relative(dir).generic_string() +
                    (fs::is_directory(e.symlink_status()) ? "/" : ""));
  std::sort(names.begin(), names.end());
  return names;
}

/// The outcome of an async_receive_one started in the background.
struct pending_receive {
  bool done = false;
  ar::error_code ec;
  ar::receive_result result;
};

void start_receive(ar::file_receiver& r, pending_receive& p) {
  r.async_receive_one([&p](ar::error_code ec, ar::receive_result res) {
    p.ec = ec;
    p.result = std::move(res);
    p.done = true;
  });
}

awaitable<void> wait_until(const bool& flag,
                           std::chrono::seconds limit = std::chrono::seconds(30)) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!flag && std::chrono::steady_clock::now() < deadline) {
    t.expires_after(std::chrono::milliseconds(5));
    co_await t.async_wait(use_awaitable);
  }
  BOOST_REQUIRE_MESSAGE(flag, "the receiver did not finish in time");
}

awaitable<ar::connection> connect_to(const ar::file_receiver& r) {
  auto ex = co_await asio::this_coro::executor;
  ar::connection_options options;
  options.timeout = std::chrono::seconds(10);
  co_return co_await ar::async_connect(ex, device_address(), r.local_endpoint().port(), options,
                                       use_awaitable);
}

ar::file_receiver make_receiver(asio::io_context& io, const fs::path& dir,
                                std::size_t buffer_size = 64 * 1024) {
  ar::file_receiver_options options;
  options.transfer.buffer_size = buffer_size;
  options.transfer.timeout = std::chrono::seconds(10);
  return ar::file_receiver(io.get_executor(), device_address(), 0, dir, options);
}

ar::file_transfer_options sender_options(std::size_t buffer_size = 64 * 1024) {
  ar::file_transfer_options o;
  o.buffer_size = buffer_size;
  o.timeout = std::chrono::seconds(10);
  return o;
}

// -- A hand-driven peer speaking the protocol (for misbehaving senders).

awaitable<void> send_message(ar::connection& conn, const proto::message& m) {
  std::vector<std::byte> bytes(proto::max_message_size);
  bytes.resize(proto::encode(m, bytes));
  BOOST_REQUIRE(!bytes.empty());
  co_await conn.async_send(asio::buffer(bytes), use_awaitable);
}

awaitable<proto::message> receive_message(ar::connection& conn) {
  std::array<std::byte, 64> in{};
  auto n = co_await conn.async_receive(asio::buffer(in), use_awaitable);
  ar::error_code ec;
  auto m = proto::decode(std::span<const std::byte>(in.data(), n), ec);
  BOOST_REQUIRE(!ec);
  co_return m;
}

awaitable<proto::hello_ack> handshake(ar::connection& conn) {
  proto::hello hello{64 * 1024, 4};
  co_await send_message(conn, hello);
  auto m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::hello_ack>(m));
  co_return std::get<proto::hello_ack>(m);
}

} // namespace

BOOST_AUTO_TEST_CASE(files_of_0_1_and_several_megabytes_arrive_byte_for_byte) {
  asio::io_context io;
  temp_dir src, dst;
  const std::size_t big = 3 * 1024 * 1024 + 12345; // not a multiple of the chunk
  write_file(src.path / "empty", 0, 1);
  write_file(src.path / "one", 1, 2);
  write_file(src.path / "big.bin", big, 3);
  fs::permissions(src.path / "big.bin", fs::perms(0640));
  auto receiver = make_receiver(io, dst.path);
  std::vector<std::string> seen;
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options();
    std::uint64_t bytes = 0;
    for (const char* name : {"empty", "one", "big.bin"}) {
      auto r = co_await ar::async_send_file(conn, src.path / name, options, use_awaitable);
      BOOST_TEST(r.files == 1u);
      BOOST_TEST(r.chunk_size == 65536u);
      bytes += r.bytes;
    }
    BOOST_TEST(bytes == big + 1);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(p.result.files.size() == 3u);
  BOOST_TEST(p.result.bytes == big + 1);
  for (const char* name : {"empty", "one", "big.bin"})
    BOOST_TEST(same_file(src.path / name, dst.path / name), name);
  BOOST_TEST(fs::file_size(dst.path / "empty") == 0u);
  BOOST_TEST(fs::file_size(dst.path / "big.bin") == big);
  BOOST_TEST(int(fs::status(dst.path / "big.bin").permissions()) == 0640);
  auto expected = std::vector<std::string>{"big.bin", "empty", "one"};
  BOOST_TEST(listing(dst.path) == expected, boost::test_tools::per_element()); // no .part left
}

BOOST_AUTO_TEST_CASE(a_tree_with_nested_directories_is_recreated) {
  asio::io_context io;
  temp_dir src, dst;
  fs::path root = src.path / "tree";
  write_file(root / "top.txt", 100, 1);
  write_file(root / "a" / "b" / "c" / "deep.bin", 200 * 1024 + 7, 2);
  write_file(root / "a" / "mid.bin", 65536, 3);
  fs::create_directories(root / "empty_dir");
  fs::create_symlink("/etc/passwd", root / "link"); // not sent
  auto receiver = make_receiver(io, dst.path);
  std::vector<std::string> callbacks;
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options();
    auto r = co_await ar::async_send_tree(conn, root, options, use_awaitable);
    BOOST_TEST(r.files == 8u); // tree, a, a/b, a/b/c, empty_dir + 3 files
    BOOST_TEST(r.bytes == 100u + 200 * 1024 + 7 + 65536);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(p.result.files.size() == 8u);
  auto expected = std::vector<std::string>{
      "tree/",          "tree/a/",         "tree/a/b/",   "tree/a/b/c/", "tree/a/b/c/deep.bin",
      "tree/a/mid.bin", "tree/empty_dir/", "tree/top.txt"};
  BOOST_TEST(listing(dst.path) == expected, boost::test_tools::per_element());
  for (const char* f : {"top.txt", "a/b/c/deep.bin", "a/mid.bin"})
    BOOST_TEST(same_file(root / f, dst.path / "tree" / f), f);
}

BOOST_AUTO_TEST_CASE(chunk_size_is_negotiated_to_the_smaller_side) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "f", 1024 * 1024 + 3, 4);
  auto receiver = make_receiver(io, dst.path, 64 * 1024);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options(1024 * 1024);
    auto r = co_await ar::async_send_file(conn, src.path / "f", options, use_awaitable);
    BOOST_TEST(r.chunk_size == 64u * 1024);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec);
  BOOST_TEST(p.result.chunk_size == 64u * 1024);
  BOOST_TEST(same_file(src.path / "f", dst.path / "f"));

  // And the other way round: the receiver's larger buffer is cut to the sender's.
  receiver.set_buffer_size(1024 * 1024);
  pending_receive q;
  start_receive(receiver, q);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options(16 * 1024);
    auto r = co_await ar::async_send_file(conn, src.path / "f", options, use_awaitable);
    BOOST_TEST(r.chunk_size == 16u * 1024);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(q.done);
  });
  BOOST_TEST(!q.ec);
  BOOST_TEST(same_file(src.path / "f", dst.path / "f"));
}

BOOST_AUTO_TEST_CASE(names_escaping_the_directory_are_refused) {
  asio::io_context io;
  temp_dir outside;
  fs::path dst = outside.path / "inbox";
  fs::create_directories(dst);
  fs::create_directory_symlink(outside.path, dst / "sneaky"); // a link out of the directory
  auto receiver = make_receiver(io, dst);
  for (std::string name : {std::string("../evil"), (outside.path / "abs").string(),
                           std::string("a/../../evil"), std::string("sneaky/evil")}) {
    pending_receive p;
    start_receive(receiver, p);
    run(io, [&]() -> awaitable<void> {
      auto conn = co_await connect_to(receiver);
      co_await handshake(conn);
      proto::file_begin b{0, proto::entry_kind::file, 0644, 10, name};
      co_await send_message(conn, b);
      auto m = co_await receive_message(conn);
      BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
      auto code = std::get<proto::status>(m).code;
      BOOST_TEST((code == proto::status_code::bad_name || code == proto::status_code::io_error),
                 name);
      co_await wait_until(p.done);
    });
    BOOST_TEST(p.ec.failed(), name);
    if (name != "sneaky/evil")
      BOOST_TEST((p.ec == ar::errc::protocol_error), name << ": " << p.ec.message());
  }
  auto expected = std::vector<std::string>{"inbox/", "inbox/sneaky"};
  BOOST_TEST(listing(outside.path) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_sender_sees_the_refusal_as_a_protocol_error) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "f", 10, 1);
  fs::create_directories(dst.path / "f"); // the name is taken by a directory
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options();
    auto [ec, r] =
        co_await ar::async_send_file(conn, src.path / "f", options, asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == ar::errc::remote_failure), ec.message());
    BOOST_TEST(!conn.is_open()); // the sender closed the stream
    co_await wait_until(p.done);
  });
  BOOST_TEST(p.ec.failed());
  BOOST_TEST(fs::is_directory(dst.path / "f"));
  BOOST_TEST(!fs::exists(dst.path / "f.part"));
}

BOOST_AUTO_TEST_CASE(garbage_from_the_peer_is_a_protocol_error) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    std::string garbage = "GET / HTTP/1.1\r\n\r\n";
    co_await conn.async_send(asio::buffer(garbage), use_awaitable);
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == ar::errc::protocol_error), p.ec.message());
  BOOST_TEST(fs::is_empty(dst.path));
}

BOOST_AUTO_TEST_CASE(a_sender_vanishing_mid_file_leaves_no_file) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto ack = co_await handshake(conn);
    BOOST_TEST(ack.chunk_size == 64u * 1024);
    proto::file_begin b{0, proto::entry_kind::file, 0644, 1024 * 1024, "partial.bin"};
    co_await send_message(conn, b);
    auto m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
    ar::memory_region local(conn, ack.chunk_size, ar::access::local_write);
    co_await conn.async_write_with_imm(local.slice(), ack.buffer.slice(0, ack.chunk_size), 0,
                                       use_awaitable);
    m = co_await receive_message(conn); // the credit: the chunk is on disk
    BOOST_REQUIRE(std::holds_alternative<proto::credit>(m));
    BOOST_TEST(fs::exists(dst.path / "partial.bin.part"));
    conn.close();
    co_await wait_until(p.done);
  });
  BOOST_TEST(p.ec.failed());
  BOOST_TEST(p.result.files.empty());
  BOOST_TEST(fs::is_empty(dst.path)); // neither partial.bin nor partial.bin.part
}

BOOST_AUTO_TEST_CASE(a_silent_peer_times_out) {
  asio::io_context io;
  temp_dir dst;
  ar::file_receiver_options options;
  options.transfer.timeout = std::chrono::milliseconds(300);
  ar::file_receiver receiver(io.get_executor(), device_address(), 0, dst.path, options);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == asio::error::timed_out), p.ec.message());
}

BOOST_AUTO_TEST_CASE(stop_aborts_pending_operations) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  // A receive waiting for a connection.
  pending_receive idle;
  start_receive(receiver, idle);
  // A server with a connection in the middle of a file.
  auto second = make_receiver(io, dst.path);
  bool run_done = false;
  ar::error_code run_ec;
  std::vector<ar::error_code> sessions;
  second.async_run([&](ar::error_code ec, const ar::receive_result&) { sessions.push_back(ec); },
                   [&](ar::error_code ec) {
                     run_ec = ec;
                     run_done = true;
                   });
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(second);
    co_await handshake(conn);
    proto::file_begin b{0, proto::entry_kind::file, 0644, 100, "unfinished"};
    co_await send_message(conn, b);
    co_await receive_message(conn);
    receiver.stop();
    second.stop();
    co_await wait_until(idle.done);
    co_await wait_until(run_done);
  });
  BOOST_TEST((idle.ec == asio::error::operation_aborted), idle.ec.message());
  BOOST_TEST((run_ec == asio::error::operation_aborted), run_ec.message());
  BOOST_REQUIRE(sessions.size() == 1u);
  BOOST_TEST((sessions[0] == asio::error::operation_aborted), sessions[0].message());
  BOOST_TEST(fs::is_empty(dst.path));
  // After stop(), new operations fail the same way.
  pending_receive late;
  start_receive(receiver, late);
  run(io, [&]() -> awaitable<void> { co_await wait_until(late.done); });
  BOOST_TEST((late.ec == asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(a_missing_file_fails_before_anything_is_sent) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options();
    auto [ec, r] = co_await ar::async_send_file(conn, dst.path / "nope", options,
                                                asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == boost::system::errc::no_such_file_or_directory), ec.message());
    BOOST_TEST(conn.is_open()); // nothing was sent: the connection stays usable
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec);
}

BOOST_AUTO_TEST_CASE(cancelling_a_send_aborts_it_and_leaves_no_file) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "big", 2 * 1024 * 1024, 5);
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options(4096);
    asio::cancellation_signal cancel;
    bool done = false;
    ar::error_code ec;
    ar::async_send_file(
        conn, src.path / "big", options,
        asio::bind_cancellation_slot(cancel.slot(), [&](ar::error_code e, ar::transfer_result) {
          ec = e;
          done = true;
        }));
    cancel.emit(asio::cancellation_type::terminal);
    co_await wait_until(done);
    BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
    BOOST_TEST(!conn.is_open());
    co_await wait_until(p.done);
  });
  BOOST_TEST(p.ec.failed());
  BOOST_TEST(fs::is_empty(dst.path));
}
