// The file transfer on a real device: single files of awkward sizes, a tree,
// chunk negotiation, hostile and vanishing peers, timeouts and stop().
#define BOOST_TEST_MODULE integration_file_transfer
#include "rdma_test.hpp"

#include "../../lib/file_transfer/protocol.hpp"
#include <asio_rdma/file_transfer.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <stdlib.h>
#include <sys/mount.h>
#include <thread>
#include <tuple>
#include <unistd.h>
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

/// Names of the unfinished files (*.part) anywhere below `dir`.
std::vector<std::string> part_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".part")
      names.push_back(e.path().lexically_relative(dir).generic_string());
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
                                std::size_t buffer_size = 64 * 1024,
                                ar::overwrite_policy overwrite = ar::overwrite_policy::refuse) {
  ar::file_receiver_options options;
  options.overwrite = overwrite;
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
  // The same name twice: replaced on request.
  auto receiver = make_receiver(io, dst.path, 64 * 1024, ar::overwrite_policy::replace);
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

BOOST_AUTO_TEST_CASE(a_name_taken_by_a_directory_fails_the_sender_with_remote_failure) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "f", 10, 1);
  fs::create_directories(dst.path / "f"); // the name is taken by a directory
  // Even when replacing is allowed, a directory is not replaced by a file.
  auto receiver = make_receiver(io, dst.path, 64 * 1024, ar::overwrite_policy::replace);
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
  BOOST_TEST(part_files(dst.path).empty());
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
    // The chunk went to this transfer's own temporary, partial.bin.XXXXXX.part.
    auto parts = part_files(dst.path);
    BOOST_REQUIRE(parts.size() == 1u);
    BOOST_TEST(parts[0].starts_with("partial.bin."));
    BOOST_TEST(parts[0].size() == std::string("partial.bin.XXXXXX.part").size());
    conn.close();
    co_await wait_until(p.done);
  });
  BOOST_TEST(p.ec.failed());
  BOOST_TEST(p.result.files.empty());
  BOOST_TEST(fs::is_empty(dst.path)); // neither partial.bin nor its temporary
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

BOOST_AUTO_TEST_CASE(two_senders_of_one_name_at_once_leave_exactly_one_complete_file) {
  asio::io_context io;
  temp_dir src, dst;
  const std::size_t size = 1024 * 1024 + 17; // 65 chunks of 16 KiB: the transfers overlap
  write_file(src.path / "a" / "same.bin", size, 11);
  write_file(src.path / "b" / "same.bin", size, 12);
  const auto content_a = read_file(src.path / "a" / "same.bin");
  const auto content_b = read_file(src.path / "b" / "same.bin");
  BOOST_REQUIRE(content_a != content_b);
  auto receiver = make_receiver(io, dst.path, 16 * 1024, ar::overwrite_policy::replace);
  std::vector<ar::error_code> sessions;
  bool run_done = false;
  receiver.async_run([&](ar::error_code ec, const ar::receive_result&) { sessions.push_back(ec); },
                     [&](ar::error_code) { run_done = true; });
  int stored_a = 0, stored_b = 0;
  for (int round = 0; round < 6; ++round) {
    run(io, [&]() -> awaitable<void> {
      auto first = co_await connect_to(receiver);
      auto second = co_await connect_to(receiver);
      auto options = sender_options(16 * 1024);
      ar::error_code ec_a, ec_b;
      bool done_a = false, done_b = false;
      // Both started in the same turn: both files are open on the receiver at once.
      ar::async_send_file(first, src.path / "a" / "same.bin", options,
                          [&](ar::error_code ec, ar::transfer_result) {
                            ec_a = ec;
                            done_a = true;
                          });
      ar::async_send_file(second, src.path / "b" / "same.bin", options,
                          [&](ar::error_code ec, ar::transfer_result) {
                            ec_b = ec;
                            done_b = true;
                          });
      co_await wait_until(done_a);
      co_await wait_until(done_b);
      BOOST_TEST(!ec_a, "round " << round << ": " << ec_a.message());
      BOOST_TEST(!ec_b, "round " << round << ": " << ec_b.message());
      co_await first.async_disconnect(asio::as_tuple(use_awaitable));
      co_await second.async_disconnect(asio::as_tuple(use_awaitable));
      auto ex = co_await asio::this_coro::executor;
      asio::steady_timer t(ex);
      for (int i = 0; i < 3000 && sessions.size() < std::size_t(2 * (round + 1)); ++i) {
        t.expires_after(std::chrono::milliseconds(5));
        co_await t.async_wait(use_awaitable);
      }
      BOOST_TEST(sessions.size() == std::size_t(2 * (round + 1)));
    });
    auto stored = read_file(dst.path / "same.bin");
    BOOST_TEST((stored == content_a || stored == content_b),
               "round " << round << ": the stored file is neither sender's");
    stored_a += stored == content_a;
    stored_b += stored == content_b;
    auto expected = std::vector<std::string>{"same.bin"};
    BOOST_TEST(listing(dst.path) == expected, boost::test_tools::per_element()); // no .part left
  }
  BOOST_TEST_MESSAGE("stored a " << stored_a << " times, b " << stored_b << " times");
  receiver.stop();
  run(io, [&]() -> awaitable<void> { co_await wait_until(run_done); });
  BOOST_TEST(sessions.size() == 12u);
  for (auto& ec : sessions)
    BOOST_TEST(!ec, ec.message());
}

BOOST_AUTO_TEST_CASE(on_file_is_called_once_per_stored_entry_with_its_name_and_size) {
  asio::io_context io;
  temp_dir src, dst;
  fs::path root = src.path / "t";
  write_file(root / "x.bin", 70000, 1);
  write_file(root / "d" / "y.bin", 3, 2);
  write_file(root / "d" / "z", 0, 3);
  write_file(src.path / "single", 123457, 4);
  ar::file_receiver_options options;
  options.transfer.buffer_size = 64 * 1024;
  options.transfer.timeout = std::chrono::seconds(10);
  std::vector<ar::received_file> seen;
  options.on_file = [&](const ar::received_file& f) { seen.push_back(f); };
  ar::file_receiver receiver(io.get_executor(), device_address(), 0, dst.path, options);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto o = sender_options();
    co_await ar::async_send_tree(conn, root, o, use_awaitable);
    co_await ar::async_send_file(conn, src.path / "single", o, use_awaitable);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  struct entry {
    std::string name;
    std::uint64_t size;
    bool directory;
  };
  std::vector<entry> expected{{"single", 123457, false}, {"t", 0, true},
                              {"t/d", 0, true},          {"t/d/y.bin", 3, false},
                              {"t/d/z", 0, false},       {"t/x.bin", 70000, false}};
  BOOST_REQUIRE(seen.size() == expected.size()); // once each
  BOOST_TEST(seen.back().name == "single");      // in the order stored
  auto sorted = seen;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (std::size_t i = 0; i < expected.size(); ++i) {
    BOOST_TEST(sorted[i].name == expected[i].name);
    BOOST_TEST(sorted[i].size == expected[i].size, sorted[i].name);
    BOOST_TEST(sorted[i].directory == expected[i].directory, sorted[i].name);
    BOOST_TEST(sorted[i].path == dst.path / expected[i].name);
  }
  // The same entries, in the same order, as the session's result.
  BOOST_REQUIRE(p.result.files.size() == seen.size());
  for (std::size_t i = 0; i < seen.size(); ++i)
    BOOST_TEST(p.result.files[i].name == seen[i].name);
}

BOOST_AUTO_TEST_CASE(set_buffer_size_applies_to_later_connections_only) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "f", 300 * 1024 + 1, 4);
  auto receiver = make_receiver(io, dst.path, 64 * 1024, ar::overwrite_policy::replace);
  auto big_offer = sender_options(1024 * 1024);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto r = co_await ar::async_send_file(conn, src.path / "f", big_offer, use_awaitable);
    BOOST_TEST(r.chunk_size == 64u * 1024);
    receiver.set_buffer_size(16 * 1024);
    // This connection was accepted with 64 KiB: it keeps it.
    r = co_await ar::async_send_file(conn, src.path / "f", big_offer, use_awaitable);
    BOOST_TEST(r.chunk_size == 64u * 1024);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  pending_receive q;
  start_receive(receiver, q);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto r = co_await ar::async_send_file(conn, src.path / "f", big_offer, use_awaitable);
    BOOST_TEST(r.chunk_size == 16u * 1024); // a new connection gets the new size
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(q.done);
  });
  BOOST_TEST(!q.ec, q.ec.message());
  BOOST_TEST(q.result.chunk_size == 16u * 1024);
  BOOST_TEST(same_file(src.path / "f", dst.path / "f"));
  ar::error_code ec;
  receiver.set_buffer_size(100, ec); // below the minimum: refused, nothing changes
  BOOST_TEST(ec == ar::errc::invalid_option);
}

namespace {

/// Handshake with an explicit offer.
awaitable<proto::hello_ack> handshake_with(ar::connection& conn, std::uint32_t chunk,
                                           std::uint16_t depth) {
  proto::hello hello{chunk, depth};
  co_await send_message(conn, hello);
  auto m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::hello_ack>(m));
  co_return std::get<proto::hello_ack>(m);
}

enum class file_end_fault { none, wrong_crc, wrong_size };

/// Sends one file of `size` bytes by hand, in chunks of the negotiated size,
/// all of them before waiting for any credit, then a file_end with `fault`;
/// returns the receiver's status code.
awaitable<proto::status_code> send_by_hand(ar::connection& conn, const proto::hello_ack& ack,
                                           std::size_t size, file_end_fault fault) {
  proto::file_begin b{0, proto::entry_kind::file, 0644, size, "checked.bin"};
  co_await send_message(conn, b);
  auto m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
  BOOST_REQUIRE((std::get<proto::status>(m).code == proto::status_code::ok));
  ar::memory_region local(conn, size, ar::access::local_write);
  for (std::size_t i = 0; i < size; ++i)
    local.data()[i] = ar::test::pattern(9, i);
  std::size_t chunks = (size + ack.chunk_size - 1) / ack.chunk_size;
  BOOST_REQUIRE(chunks <= ack.slots); // every chunk in its own slot, all in flight at once
  for (std::size_t seq = 0; seq < chunks; ++seq) {
    std::size_t offset = seq * ack.chunk_size;
    std::size_t length = std::min<std::size_t>(ack.chunk_size, size - offset);
    co_await conn.async_write_with_imm(local.slice(offset, length),
                                       ack.buffer.slice(seq * ack.chunk_size, length),
                                       static_cast<std::uint32_t>(seq), use_awaitable);
  }
  for (std::size_t seq = 0; seq < chunks; ++seq) {
    m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::credit>(m));
    BOOST_TEST(std::get<proto::credit>(m).sequence == seq);
  }
  std::uint32_t crc = proto::crc32c(0, local.data());
  proto::file_end e{0, fault == file_end_fault::wrong_crc ? crc ^ 1u : crc,
                    fault == file_end_fault::wrong_size ? size + 1 : size};
  co_await send_message(conn, e);
  m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
  co_return std::get<proto::status>(m).code;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_wrong_checksum_or_size_in_file_end_is_refused) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  const std::size_t size = 3 * 64 * 1024 - 100; // three chunks
  for (auto fault : {file_end_fault::wrong_crc, file_end_fault::wrong_size}) {
    pending_receive p;
    start_receive(receiver, p);
    run(io, [&]() -> awaitable<void> {
      auto conn = co_await connect_to(receiver);
      auto ack = co_await handshake(conn);
      auto code = co_await send_by_hand(conn, ack, size, fault);
      BOOST_TEST(
          (code == (fault == file_end_fault::wrong_crc ? proto::status_code::checksum_mismatch
                                                       : proto::status_code::size_mismatch)),
          int(code));
      co_await wait_until(p.done);
    });
    BOOST_TEST((p.ec == ar::errc::protocol_error), p.ec.message());
    BOOST_TEST(p.result.files.empty());
    BOOST_TEST(fs::is_empty(dst.path)); // neither the file nor its temporary
  }
  // The same exchange with the right checksum and size stores the file.
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto ack = co_await handshake(conn);
    auto code = co_await send_by_hand(conn, ack, size, file_end_fault::none);
    BOOST_TEST((code == proto::status_code::ok), int(code));
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(fs::file_size(dst.path / "checked.bin") == size);
}

BOOST_AUTO_TEST_CASE(depth_is_negotiated_to_the_smaller_side_and_all_slots_are_usable_at_once) {
  asio::io_context io;
  temp_dir dst;
  ar::file_receiver_options options;
  options.transfer.buffer_size = 4096;
  options.transfer.depth = 3;
  options.transfer.timeout = std::chrono::seconds(10);
  options.overwrite = ar::overwrite_policy::replace; // checked.bin twice
  ar::file_receiver receiver(io.get_executor(), device_address(), 0, dst.path, options);
  for (std::uint16_t offered : {8, 2}) {
    pending_receive p;
    start_receive(receiver, p);
    run(io, [&]() -> awaitable<void> {
      auto conn = co_await connect_to(receiver);
      auto ack = co_await handshake_with(conn, 64 * 1024, offered);
      const std::uint16_t slots = std::min<std::uint16_t>(offered, 3);
      BOOST_TEST(ack.slots == slots);
      BOOST_TEST(ack.chunk_size == 4096u);
      BOOST_TEST(ack.buffer.length >= std::uint64_t(slots) * 4096);
      // As many chunks as slots, written before any credit came back.
      auto code =
          co_await send_by_hand(conn, ack, std::size_t(slots) * 4096 - 1, file_end_fault::none);
      BOOST_TEST((code == proto::status_code::ok), int(code));
      co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
      co_await wait_until(p.done);
    });
    BOOST_TEST(!p.ec, p.ec.message());
  }
}

BOOST_AUTO_TEST_CASE(the_sender_keeps_the_negotiated_depth_in_flight_and_waits_for_credits) {
  asio::io_context io;
  temp_dir src;
  constexpr std::uint32_t chunk = 4096;
  constexpr std::uint16_t slots = 3;
  constexpr std::size_t chunks = 10;
  const std::size_t size = chunk * chunks - 5;
  write_file(src.path / "f", size, 7);
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, device_address(), 0);
    // The real sender, offering depth 8.
    bool sent = false;
    ar::error_code send_ec;
    ar::transfer_result sent_result;
    ar::connection client;
    const auto port = acceptor.local_endpoint().port();
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          ar::connection_options o;
          o.timeout = std::chrono::seconds(10);
          client = co_await ar::async_connect(ex, device_address(), port, o, use_awaitable);
          auto options = sender_options(64 * 1024);
          options.depth = 8;
          auto [ec, r] = co_await ar::async_send_file(client, src.path / "f", options,
                                                      asio::as_tuple(use_awaitable));
          send_ec = ec;
          sent_result = r;
          sent = true;
        },
        ar::test::report_failure);
    // A receiver by hand that grants 3 slots and holds its credits back.
    auto server = co_await acceptor.async_accept(use_awaitable);
    ar::memory_region region(server, std::size_t(chunk) * slots,
                             ar::access::local_write | ar::access::remote_write);
    auto m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::hello>(m));
    BOOST_TEST(std::get<proto::hello>(m).depth == 8u);
    BOOST_TEST(std::get<proto::hello>(m).chunk_size == 64u * 1024);
    proto::hello_ack ack{chunk, slots, region.remote()};
    co_await send_message(server, ack);
    m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::file_begin>(m));
    BOOST_TEST(std::get<proto::file_begin>(m).size == size);
    const proto::status ok{0, proto::status_code::ok};
    co_await send_message(server, ok);

    std::array<std::byte, 64> in{};
    auto next_write = [&](std::chrono::milliseconds limit)
        -> awaitable<std::tuple<ar::error_code, ar::received_message>> {
      asio::cancellation_signal cancel;
      asio::steady_timer t(ex, limit);
      t.async_wait([&cancel](ar::error_code e) {
        if (!e)
          cancel.emit(asio::cancellation_type::terminal);
      });
      auto r = co_await server.async_receive_message(
          asio::buffer(in),
          asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(use_awaitable)));
      t.cancel();
      co_return r;
    };
    std::uint32_t crc = 0;
    auto take = [&](std::uint32_t seq) -> awaitable<void> {
      auto [ec, w] = co_await next_write(std::chrono::seconds(10));
      BOOST_REQUIRE_MESSAGE(!ec, "chunk " << seq << ": " << ec.message());
      BOOST_REQUIRE(w.rdma_write);
      BOOST_REQUIRE(w.immediate.has_value());
      BOOST_TEST(*w.immediate == seq);
      auto length = std::min<std::size_t>(chunk, size - std::size_t(seq) * chunk);
      BOOST_TEST(w.size == length);
      crc = proto::crc32c(crc, region.data().subspan((seq % slots) * chunk, length));
    };
    // Without a credit the sender writes the first `slots` chunks, all at once...
    for (std::uint32_t seq = 0; seq < slots; ++seq)
      co_await take(seq);
    // ...and not one more.
    auto [quiet_ec, extra] = co_await next_write(std::chrono::milliseconds(500));
    BOOST_TEST((quiet_ec == asio::error::operation_aborted), "a chunk beyond the depth arrived");
    // Each credit frees one slot for exactly one more chunk.
    for (std::uint32_t seq = slots; seq < chunks; ++seq) {
      proto::credit credit{seq - slots};
      co_await send_message(server, credit);
      co_await take(seq);
    }
    for (std::uint32_t seq = chunks - slots; seq < chunks; ++seq) {
      proto::credit credit{seq};
      co_await send_message(server, credit);
    }
    m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::file_end>(m));
    BOOST_TEST(std::get<proto::file_end>(m).size == size);
    BOOST_TEST(std::get<proto::file_end>(m).crc32c == crc);
    co_await send_message(server, ok);
    co_await wait_until(sent);
    BOOST_TEST(!send_ec, send_ec.message());
    BOOST_TEST(sent_result.chunk_size == chunk);
    BOOST_TEST(sent_result.bytes == size);
  });
}

BOOST_AUTO_TEST_CASE(a_plain_file_as_a_tree_or_as_the_receiving_directory_is_not_a_directory) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "plain", 10, 1);
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options();
    auto [ec, r] = co_await ar::async_send_tree(conn, src.path / "plain", options,
                                                asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == boost::system::errc::not_a_directory), ec.message());
    BOOST_TEST(conn.is_open()); // nothing was sent
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec);
  BOOST_CHECK_EXCEPTION(make_receiver(io, src.path / "plain"), boost::system::system_error,
                        [](const boost::system::system_error& e) {
                          return e.code() == boost::system::errc::not_a_directory;
                        });
}

// -- Durability, overwrite policy, size limits (issue 11).

namespace {

/// Sends `file` on a new connection to `receiver` (served by async_receive_one)
/// and returns both sides' outcomes.
struct both_sides {
  ar::error_code sender;
  ar::transfer_result sent;
  pending_receive receiver;
};

both_sides send_one(asio::io_context& io, ar::file_receiver& receiver, const fs::path& file,
                    ar::file_transfer_options options = sender_options()) {
  both_sides out;
  start_receive(receiver, out.receiver);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto [ec, r] = co_await ar::async_send_file(conn, file, options, asio::as_tuple(use_awaitable));
    out.sender = ec;
    out.sent = r;
    if (conn.is_open())
      co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(out.receiver.done);
  });
  return out;
}

ar::file_receiver make_receiver_with(asio::io_context& io, const fs::path& dir,
                                     ar::file_receiver_options options) {
  options.transfer.buffer_size = 64 * 1024;
  options.transfer.timeout = std::chrono::seconds(10);
  return ar::file_receiver(io.get_executor(), device_address(), 0, dir, options);
}

} // namespace

BOOST_AUTO_TEST_CASE(files_are_fsynced_before_their_name_is_reported_unless_turned_off) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "a.bin", 200 * 1024 + 3, 21);
  write_file(src.path / "b.bin", 100 * 1024 + 1, 22);
  BOOST_TEST(ar::file_receiver_options().fsync); // on by default
  auto durable = make_receiver(io, dst.path);
  auto out = send_one(io, durable, src.path / "a.bin");
  BOOST_TEST(!out.sender, out.sender.message());
  BOOST_TEST(!out.receiver.ec, out.receiver.ec.message());
  BOOST_REQUIRE(out.receiver.result.files.size() == 1u);
  BOOST_TEST(out.receiver.result.files[0].durable);
  BOOST_TEST(same_file(src.path / "a.bin", dst.path / "a.bin"));

  ar::file_receiver_options off;
  off.fsync = false;
  auto fast = make_receiver_with(io, dst.path, off);
  out = send_one(io, fast, src.path / "b.bin");
  BOOST_TEST(!out.sender, out.sender.message());
  BOOST_REQUIRE(out.receiver.result.files.size() == 1u);
  BOOST_TEST(!out.receiver.result.files[0].durable);
  BOOST_TEST(same_file(src.path / "b.bin", dst.path / "b.bin"));
  BOOST_TEST(part_files(dst.path).empty());
}

BOOST_AUTO_TEST_CASE(an_existing_name_is_refused_by_default_and_replaced_or_kept_on_request) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "f.txt", 70 * 1024, 31);
  write_file(dst.path / "f.txt", 1000, 32);
  const auto old_content = read_file(dst.path / "f.txt");

  // Default: refused on both sides with "file exists on receiver", nothing changed.
  auto refusing = make_receiver(io, dst.path);
  auto out = send_one(io, refusing, src.path / "f.txt");
  BOOST_TEST((out.sender == ar::errc::file_exists), out.sender.message());
  BOOST_TEST(out.sender.message() == "file exists on receiver");
  BOOST_TEST((out.receiver.ec == ar::errc::file_exists), out.receiver.ec.message());
  BOOST_TEST(out.receiver.result.files.empty());
  BOOST_TEST((read_file(dst.path / "f.txt") == old_content));
  auto only = std::vector<std::string>{"f.txt"};
  BOOST_TEST(listing(dst.path) == only, boost::test_tools::per_element());

  // keep_both: the new file gets the first free numbered name, twice.
  ar::file_receiver_options keep;
  keep.overwrite = ar::overwrite_policy::keep_both;
  auto keeping = make_receiver_with(io, dst.path, keep);
  for (const char* expected : {"f.1.txt", "f.2.txt"}) {
    out = send_one(io, keeping, src.path / "f.txt");
    BOOST_TEST(!out.sender, out.sender.message());
    BOOST_REQUIRE(out.receiver.result.files.size() == 1u);
    BOOST_TEST(out.receiver.result.files[0].path == dst.path / expected);
    BOOST_TEST(out.receiver.result.files[0].name == "f.txt");
    BOOST_TEST(same_file(src.path / "f.txt", dst.path / expected), expected);
  }
  BOOST_TEST((read_file(dst.path / "f.txt") == old_content));

  // replace: on request only.
  ar::file_receiver_options replace;
  replace.overwrite = ar::overwrite_policy::replace;
  auto replacing = make_receiver_with(io, dst.path, replace);
  out = send_one(io, replacing, src.path / "f.txt");
  BOOST_TEST(!out.sender, out.sender.message());
  BOOST_TEST(same_file(src.path / "f.txt", dst.path / "f.txt"));
  auto three = std::vector<std::string>{"f.1.txt", "f.2.txt", "f.txt"};
  BOOST_TEST(listing(dst.path) == three, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_file_over_the_maximum_size_or_the_free_space_is_refused_before_writing) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "big", 2000, 41);
  ar::file_receiver_options limited;
  limited.max_file_size = 1000;
  auto receiver = make_receiver_with(io, dst.path, limited);
  auto out = send_one(io, receiver, src.path / "big");
  BOOST_TEST((out.sender == ar::errc::file_too_large), out.sender.message());
  BOOST_TEST((out.receiver.ec == ar::errc::file_too_large), out.receiver.ec.message());
  BOOST_TEST(fs::is_empty(dst.path));

  // A sender claiming 2^62 bytes: more than any free space, refused at once.
  auto unlimited = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(unlimited, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(unlimited);
    co_await handshake(conn);
    proto::file_begin b{0, proto::entry_kind::file, 0644, std::uint64_t(1) << 62, "huge.bin"};
    co_await send_message(conn, b);
    auto m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
    BOOST_TEST((std::get<proto::status>(m).code == proto::status_code::no_space));
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == ar::errc::no_space), p.ec.message());
  BOOST_TEST(p.ec.message() == "no space on receiver");
  BOOST_TEST(fs::is_empty(dst.path));
}

BOOST_AUTO_TEST_CASE(
    running_out_of_disk_mid_file_is_no_space_on_both_sides_and_leaves_no_temporary) {
  asio::io_context io;
  temp_dir src, mountpoint;
  // A file system of 8 MiB of our own (the test runs as root in the VM).
  BOOST_REQUIRE_MESSAGE(::mount("tmpfs", mountpoint.path.c_str(), "tmpfs", 0, "size=8m") == 0,
                        "mount tmpfs: " << std::strerror(errno));
  struct unmount {
    fs::path p;
    ~unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount_at_end{mountpoint.path};
  const std::size_t size = 6 * 1024 * 1024; // fits the free space when it begins
  write_file(src.path / "f", size, 51);
  auto receiver = make_receiver(io, mountpoint.path);
  // Once the temporary exists (the free-space check passed), fill the file
  // system to the last byte, so the transfer runs out mid-file.
  std::atomic<bool> filled{false};
  std::thread filler([&] {
    for (int i = 0; i < 20000 && part_files(mountpoint.path).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    int fd = ::open((mountpoint.path / "filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    std::vector<char> block(64 * 1024, 'x');
    while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
    }
    if (fd >= 0)
      ::close(fd);
    filled = true;
  });
  auto out = send_one(io, receiver, src.path / "f");
  filler.join();
  BOOST_TEST(filled.load());
  BOOST_TEST((out.sender == ar::errc::no_space), out.sender.message());
  BOOST_TEST((out.receiver.ec == ar::errc::no_space), out.receiver.ec.message());
  BOOST_TEST(out.receiver.result.files.empty());
  BOOST_TEST(!fs::exists(mountpoint.path / "f"));
  BOOST_TEST(part_files(mountpoint.path).empty());
}

// -- Authentication (issue 11).

BOOST_AUTO_TEST_CASE(a_receiver_with_a_secret_accepts_only_senders_that_prove_it) {
  asio::io_context io;
  temp_dir src, dst;
  for (const char* name : {"right", "wrong", "missing", "by_hand"})
    write_file(src.path / name, 100 * 1024 + 5, 61);
  ar::file_receiver_options options;
  options.transfer.secret = "correct horse battery staple";
  auto receiver = make_receiver_with(io, dst.path, options);

  auto with_secret = [](std::string secret) {
    auto o = sender_options();
    o.secret = std::move(secret);
    return o;
  };
  auto out = send_one(io, receiver, src.path / "right", with_secret(options.transfer.secret));
  BOOST_TEST(!out.sender, out.sender.message());
  BOOST_TEST(!out.receiver.ec, out.receiver.ec.message());
  BOOST_TEST(same_file(src.path / "right", dst.path / "right"));

  // A wrong secret, and none at all: a clear error on both sides.
  for (const char* name : {"wrong", "missing"}) {
    auto secret =
        std::string(name) == "wrong" ? std::string("correct horse battery stapler") : std::string();
    out = send_one(io, receiver, src.path / name, with_secret(secret));
    BOOST_TEST((out.sender == ar::errc::authentication_failed),
               name << ": " << out.sender.message());
    BOOST_TEST(out.sender.message() == "authentication failed");
    BOOST_TEST((out.receiver.ec == ar::errc::authentication_failed),
               name << ": " << out.receiver.ec.message());
    BOOST_TEST(out.receiver.result.files.empty());
  }

  // A peer that skips the proof and sends a file_begin: refused, nothing created.
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    proto::hello hello{64 * 1024, 4};
    co_await send_message(conn, hello);
    auto m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::challenge>(m));
    proto::file_begin b{0, proto::entry_kind::file, 0644, 10, "by_hand"};
    co_await send_message(conn, b);
    m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
    BOOST_TEST((std::get<proto::status>(m).code == proto::status_code::authentication_failed));
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == ar::errc::authentication_failed), p.ec.message());
  auto only = std::vector<std::string>{"right"};
  BOOST_TEST(listing(dst.path) == only, boost::test_tools::per_element()); // nothing else written

  // A sender's secret is harmless for a receiver that asks for none.
  auto open_receiver = make_receiver(io, dst.path);
  out = send_one(io, open_receiver, src.path / "wrong", with_secret("anything"));
  BOOST_TEST(!out.sender, out.sender.message());
}

// -- Per-peer limits (issue 11).

BOOST_AUTO_TEST_CASE(connections_per_peer_over_the_limit_are_refused_with_too_many_requests) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "third", 1000, 71);
  write_file(src.path / "later", 1000, 72);
  ar::file_receiver_options defaults;
  BOOST_TEST(defaults.max_connections_per_peer == 16u);
  BOOST_TEST(defaults.max_files_in_flight_per_peer == 8u);
  ar::file_receiver_options options;
  options.max_connections_per_peer = 2;
  auto receiver = make_receiver_with(io, dst.path, options);
  std::vector<ar::error_code> sessions;
  bool run_done = false;
  receiver.async_run([&](ar::error_code ec, const ar::receive_result&) { sessions.push_back(ec); },
                     [&](ar::error_code) { run_done = true; });
  run(io, [&]() -> awaitable<void> {
    // Two connections from this address, idle; the third is one too many.
    auto first = co_await connect_to(receiver);
    auto second = co_await connect_to(receiver);
    auto third = co_await connect_to(receiver);
    auto [ec, r] = co_await ar::async_send_file(third, src.path / "third", sender_options(),
                                                asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == ar::errc::too_many_requests), ec.message());
    BOOST_TEST(!fs::exists(dst.path / "third"));
    // One leaves: a new connection is served again.
    co_await first.async_disconnect(asio::as_tuple(use_awaitable));
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    for (int i = 0; i < 2000 && sessions.size() < 2; ++i) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(use_awaitable);
    }
    auto fourth = co_await connect_to(receiver);
    auto [ec4, r4] = co_await ar::async_send_file(fourth, src.path / "later", sender_options(),
                                                  asio::as_tuple(use_awaitable));
    BOOST_TEST(!ec4, ec4.message());
    co_await fourth.async_disconnect(asio::as_tuple(use_awaitable));
    co_await second.async_disconnect(asio::as_tuple(use_awaitable));
    for (int i = 0; i < 2000 && sessions.size() < 4; ++i) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(use_awaitable);
    }
  });
  BOOST_TEST(sessions.size() == 4u);
  BOOST_TEST(std::count(sessions.begin(), sessions.end(),
                        ar::error_code(ar::errc::too_many_requests)) == 1);
  BOOST_TEST(same_file(src.path / "later", dst.path / "later"));
  receiver.stop();
  run(io, [&]() -> awaitable<void> { co_await wait_until(run_done); });
}

BOOST_AUTO_TEST_CASE(files_in_flight_per_peer_over_the_limit_are_refused_before_writing) {
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "second", 1000, 73);
  ar::file_receiver_options options;
  options.max_files_in_flight_per_peer = 1;
  auto receiver = make_receiver_with(io, dst.path, options);
  std::vector<ar::error_code> sessions;
  bool run_done = false;
  receiver.async_run([&](ar::error_code ec, const ar::receive_result&) { sessions.push_back(ec); },
                     [&](ar::error_code) { run_done = true; });
  run(io, [&]() -> awaitable<void> {
    // A peer by hand holds one file open (begun, not finished)...
    auto holder = co_await connect_to(receiver);
    co_await handshake(holder);
    proto::file_begin b{0, proto::entry_kind::file, 0644, 10, "held"};
    co_await send_message(holder, b);
    auto m = co_await receive_message(holder);
    BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
    BOOST_TEST((std::get<proto::status>(m).code == proto::status_code::ok));
    // ...so a second file from the same address is one too many.
    auto conn = co_await connect_to(receiver);
    auto [ec, r] = co_await ar::async_send_file(conn, src.path / "second", sender_options(),
                                                asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == ar::errc::too_many_requests), ec.message());
    BOOST_TEST(!fs::exists(dst.path / "second"));
    // The held file ends (its sender leaves): the slot is free again.
    holder.close();
    auto ex = co_await asio::this_coro::executor;
    asio::steady_timer t(ex);
    for (int i = 0; i < 2000 && sessions.size() < 2; ++i) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(use_awaitable);
    }
    auto again = co_await connect_to(receiver);
    auto [ec2, r2] = co_await ar::async_send_file(again, src.path / "second", sender_options(),
                                                  asio::as_tuple(use_awaitable));
    BOOST_TEST(!ec2, ec2.message());
    co_await again.async_disconnect(asio::as_tuple(use_awaitable));
  });
  BOOST_TEST(sessions.size() >= 2u);
  BOOST_TEST(std::count(sessions.begin(), sessions.end(),
                        ar::error_code(ar::errc::too_many_requests)) == 1);
  BOOST_TEST(same_file(src.path / "second", dst.path / "second"));
  BOOST_TEST(part_files(dst.path).empty());
  receiver.stop();
  run(io, [&]() -> awaitable<void> { co_await wait_until(run_done); });
}

// -- Progress (issue 11).

BOOST_AUTO_TEST_CASE(progress_is_reported_at_most_every_interval_and_once_at_the_end) {
  asio::io_context io;
  temp_dir src, dst;
  const std::size_t a = 3 * 1024 * 1024 + 5, b = 1024 * 1024;
  write_file(src.path / "t" / "a.bin", a, 81);
  write_file(src.path / "t" / "b.bin", b, 82);
  auto receiver = make_receiver(io, dst.path, 16 * 1024);
  std::vector<ar::transfer_progress> calls;
  auto options = sender_options(16 * 1024);
  options.progress_interval = std::chrono::milliseconds(50);
  options.on_progress = [&](const ar::transfer_progress& p) { calls.push_back(p); };
  pending_receive p;
  start_receive(receiver, p);
  ar::transfer_result result;
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    result = co_await ar::async_send_tree(conn, src.path / "t", options, use_awaitable);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(result.bytes == a + b);
  BOOST_TEST_MESSAGE(calls.size() << " progress calls over " << result.elapsed.count() / 1000000
                                  << " ms");
  BOOST_REQUIRE(calls.size() >= 3u); // the transfer takes well over 100 ms here
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const auto& c = calls[i];
    BOOST_TEST(c.bytes_total == a + b);
    BOOST_TEST(c.bytes_done <= c.bytes_total);
    if (i > 0) {
      BOOST_TEST(c.bytes_done >= calls[i - 1].bytes_done);
      // Every call but the final one comes at least an interval after the last.
      if (i + 1 < calls.size())
        BOOST_TEST((c.elapsed - calls[i - 1].elapsed >= std::chrono::milliseconds(50)), i);
    }
    double s = std::chrono::duration<double>(c.elapsed).count();
    BOOST_TEST(c.bytes_per_second == (s > 0 ? double(c.bytes_done) / s : 0.0),
               boost::test_tools::tolerance(1e-9));
  }
  BOOST_TEST(calls.back().bytes_done == a + b);
  BOOST_TEST(calls.front().bytes_done < a + b); // progress before the end
  BOOST_TEST(calls.back().bytes_per_second > 0);
  // An interval of zero is an invalid option.
  auto bad = sender_options();
  bad.progress_interval = std::chrono::milliseconds(0);
  BOOST_TEST((bad.validate() == ar::errc::invalid_option));
}

namespace {

/// Names of the kept temporaries of resumable transfers below `dir`.
std::vector<std::string> resume_parts(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& name : part_files(dir))
    if (name.ends_with(".resume.part"))
      names.push_back(name);
  return names;
}

/// Sends `path` with resume on a new connection; closes the connection (as a
/// lost link would) once `cut_after` bytes are confirmed, if not 0.
awaitable<std::tuple<ar::error_code, ar::transfer_result>>
send_resumable(const ar::file_receiver& receiver, const fs::path& path, std::uint64_t cut_after) {
  auto conn = co_await connect_to(receiver);
  auto options = sender_options();
  options.resume = true;
  options.progress_interval = std::chrono::milliseconds(1);
  if (cut_after)
    options.on_progress = [&conn, cut_after](const ar::transfer_progress& p) {
      if (p.bytes_done >= cut_after && p.bytes_done < p.bytes_total)
        conn.close();
    };
  auto r = co_await ar::async_send_file(conn, path, options, asio::as_tuple(use_awaitable));
  if (!std::get<0>(r))
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
  co_return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_interrupted_resumable_file_continues_from_the_verified_prefix) {
  asio::io_context io;
  temp_dir src, dst;
  const std::size_t size = 4 * 1024 * 1024 + 777;
  write_file(src.path / "big.bin", size, 11);
  auto receiver = make_receiver(io, dst.path);

  // 1. Cut after 1 MiB: the receiver keeps what it has as a .resume.part.
  auto interrupted = [&] {
    pending_receive p;
    start_receive(receiver, p);
    run(io, [&]() -> awaitable<void> {
      auto [ec, r] = co_await send_resumable(receiver, src.path / "big.bin", 1024 * 1024);
      BOOST_TEST(ec.failed());
      BOOST_TEST(r.bytes_sent >= 1024u * 1024);
      BOOST_TEST(r.bytes_sent < size);
      co_await wait_until(p.done);
    });
    BOOST_TEST(p.ec.failed());
    BOOST_TEST(!fs::exists(dst.path / "big.bin"));
    auto kept = resume_parts(dst.path);
    BOOST_REQUIRE(kept.size() == 1u);
    BOOST_TEST(kept[0].starts_with("big.bin."));
    auto have = fs::file_size(dst.path / kept[0]);
    BOOST_TEST(have >= 1024u * 1024);
    BOOST_TEST(have < size);
    return std::pair(dst.path / kept[0], have);
  };
  auto [part, have] = interrupted();

  // 2. Resume: only the rest is sent, and the file is byte-identical.
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto [ec, r] = co_await send_resumable(receiver, src.path / "big.bin", 0);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.bytes == size);
    BOOST_TEST(r.bytes_resumed == have);
    BOOST_TEST(r.bytes_sent == size - have);
    BOOST_TEST(r.bytes_sent < size);
    BOOST_TEST_MESSAGE("resumed " << r.bytes_resumed << " bytes, sent " << r.bytes_sent);
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(same_file(src.path / "big.bin", dst.path / "big.bin"));
  BOOST_TEST(part_files(dst.path).empty());

  // 3. A kept prefix that does not match the sender's file (here: a byte
  // changed on the receiver's disk) is not trusted: everything is sent again.
  fs::remove(dst.path / "big.bin");
  std::tie(part, have) = interrupted();
  {
    std::fstream f(part, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.seekg(1000);
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(1000);
    f.write(&c, 1);
  }
  start_receive(receiver, p = pending_receive());
  run(io, [&]() -> awaitable<void> {
    auto [ec, r] = co_await send_resumable(receiver, src.path / "big.bin", 0);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.bytes_resumed == 0u);
    BOOST_TEST(r.bytes_sent == size);
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(same_file(src.path / "big.bin", dst.path / "big.bin"));
  BOOST_TEST(part_files(dst.path).empty());
}

BOOST_AUTO_TEST_CASE(kept_files_older_than_resume_max_age_are_removed_at_start) {
  asio::io_context io;
  temp_dir dst;
  write_file(dst.path / "old.bin.0123456789abcdef.resume.part", 100, 1);
  write_file(dst.path / "sub/fresh.bin.0123456789abcdef.resume.part", 100, 2);
  write_file(dst.path / "other.part", 100, 3); // not a kept file: left alone
  fs::last_write_time(dst.path / "old.bin.0123456789abcdef.resume.part",
                      fs::file_time_type::clock::now() - std::chrono::hours(48));
  {
    auto receiver = make_receiver(io, dst.path); // resume_max_age: 24 h
  }
  BOOST_TEST(!fs::exists(dst.path / "old.bin.0123456789abcdef.resume.part"));
  BOOST_TEST(fs::exists(dst.path / "sub/fresh.bin.0123456789abcdef.resume.part"));
  BOOST_TEST(fs::exists(dst.path / "other.part"));
  ar::file_receiver_options options;
  options.resume_max_age = std::chrono::seconds(0); // keep nothing
  ar::file_receiver receiver(io.get_executor(), device_address(), 0, dst.path, options);
  BOOST_TEST(!fs::exists(dst.path / "sub/fresh.bin.0123456789abcdef.resume.part"));
  BOOST_TEST(fs::exists(dst.path / "other.part"));
}

BOOST_AUTO_TEST_CASE(a_resume_from_at_an_offset_the_receiver_did_not_offer_is_refused) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    co_await handshake(conn);
    proto::file_begin b{0, proto::entry_kind::file, 0644, 100000, "r.bin", proto::flag_resume};
    co_await send_message(conn, b);
    auto m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::resume_point>(m));
    BOOST_TEST(std::get<proto::resume_point>(m).offset == 0u); // nothing kept yet
    co_await send_message(conn, proto::resume_from{0, 4096});
    m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
    BOOST_TEST((std::get<proto::status>(m).code == proto::status_code::protocol_error));
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == ar::errc::protocol_error), p.ec.message());
  BOOST_TEST(part_files(dst.path).empty()); // a refused file is not kept
}

BOOST_AUTO_TEST_CASE(
    chunks_are_written_on_the_disk_executor_in_order_and_a_stalled_disk_holds_credits) {
  asio::io_context io;
  temp_dir src, dst;
  const std::size_t size = 2 * 1024 * 1024 + 5;
  write_file(src.path / "d.bin", size, 21);
  asio::thread_pool disk(1);
  std::promise<void> release;
  auto released = release.get_future().share();
  asio::post(disk, [released] { released.wait(); }); // the disk is busy until released
  ar::file_receiver_options options;
  options.transfer.buffer_size = 64 * 1024;
  options.transfer.timeout = std::chrono::seconds(10);
  options.disk_executor = disk.get_executor();
  ar::file_receiver receiver(io.get_executor(), device_address(), 0, dst.path, options);
  pending_receive p;
  start_receive(receiver, p);
  std::uint64_t done = 0, done_while_stalled = 1;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(500));
          co_await t.async_wait(use_awaitable);
          done_while_stalled = done;
          release.set_value();
        },
        asio::detached);
    auto conn = co_await connect_to(receiver);
    auto o = sender_options();
    o.progress_interval = std::chrono::milliseconds(1);
    o.on_progress = [&](const ar::transfer_progress& pr) { done = pr.bytes_done; };
    auto r = co_await ar::async_send_file(conn, src.path / "d.bin", o, use_awaitable);
    BOOST_TEST(r.bytes == size);
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  // The receiver took the chunks in flight but credited none while its disk
  // was stalled (the sender waited), then everything arrived in order.
  BOOST_TEST(done_while_stalled == 0u);
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(same_file(src.path / "d.bin", dst.path / "d.bin"));
  BOOST_TEST(part_files(dst.path).empty());
}
