// Shared by the file transfer integration tests (one Boost.Test module in several files):
// temporary directories, file contents, a receiver driven by async_receive_one, and the
// protocol messages sent by hand.
#pragma once

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
#include <optional>
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

namespace ft {

/// Where the tests' directories live: ASIO_RDMA_FT_ROOT if set (CTest runs
/// the suite a second time with it on the build tree, a 9p share in the
/// SoftRoCE VM: a filesystem without RENAME_NOREPLACE, as NFS), else /tmp.
inline fs::path store_root() {
  const char* root = std::getenv("ASIO_RDMA_FT_ROOT");
  if (!root || !*root)
    return "/tmp";
  fs::create_directories(root);
  return root;
}

/// A fresh directory under store_root(), removed with everything in it.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string name = (store_root() / "asio_rdma_ft_XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline void write_file(const fs::path& p, std::size_t size, std::uint64_t seed) {
  fs::create_directories(p.parent_path());
  std::vector<char> data(size);
  for (std::size_t i = 0; i < size; ++i)
    data[i] = static_cast<char>(ar::test::pattern(seed, i));
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(size));
}

inline std::vector<char> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline bool same_file(const fs::path& a, const fs::path& b) {
  return fs::exists(a) && fs::exists(b) && read_file(a) == read_file(b);
}

/// Every entry below `dir`, relative, sorted.
inline std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::recursive_directory_iterator(dir))
    names.push_back(e.path().lexically_relative(dir).generic_string() +
                    (fs::is_directory(e.symlink_status()) ? "/" : ""));
  std::sort(names.begin(), names.end());
  return names;
}

/// Names of the unfinished files (*.part) anywhere below `dir`.
inline std::vector<std::string> part_files(const fs::path& dir) {
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

inline void start_receive(ar::file_receiver& r, pending_receive& p) {
  r.async_receive_one([&p](ar::error_code ec, ar::receive_result res) {
    p.ec = ec;
    p.result = std::move(res);
    p.done = true;
  });
}

inline awaitable<void> wait_until(const bool& flag,
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

/// Waits until `dir` holds a temporary (NAME, six random characters, .part): the receiver took
/// a file_begin (an accepted one is not answered).
inline awaitable<void> wait_for_temporary(const fs::path& dir,
                                          std::chrono::seconds limit = std::chrono::seconds(30)) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (part_files(dir).empty() && std::chrono::steady_clock::now() < deadline) {
    t.expires_after(std::chrono::milliseconds(5));
    co_await t.async_wait(use_awaitable);
  }
  BOOST_REQUIRE_MESSAGE(!part_files(dir).empty(), "the receiver took no file_begin in time");
}

inline awaitable<ar::connection> connect_to(const ar::file_receiver& r) {
  auto ex = co_await asio::this_coro::executor;
  ar::connection_options options;
  options.timeout = std::chrono::seconds(10);
  co_return co_await ar::async_connect(ex, device_address(), r.local_endpoint().port(), options,
                                       use_awaitable);
}

inline ar::file_receiver
make_receiver(asio::io_context& io, const fs::path& dir, std::size_t buffer_size = 64 * 1024,
              ar::overwrite_policy overwrite = ar::overwrite_policy::refuse) {
  ar::file_receiver_options options;
  options.overwrite = overwrite;
  options.transfer.buffer_size = buffer_size;
  options.transfer.timeout = std::chrono::seconds(10);
  return ar::file_receiver(io.get_executor(), device_address(), 0, dir, options);
}

inline ar::file_transfer_options sender_options(std::size_t buffer_size = 64 * 1024) {
  ar::file_transfer_options o;
  o.buffer_size = buffer_size;
  o.timeout = std::chrono::seconds(10);
  return o;
}

// -- A hand-driven peer speaking the protocol (for misbehaving senders).

inline awaitable<void> send_message(ar::connection& conn, const proto::message& m) {
  std::vector<std::byte> bytes(proto::max_message_size);
  bytes.resize(proto::encode(m, bytes));
  BOOST_REQUIRE(!bytes.empty());
  co_await conn.async_send(asio::buffer(bytes), use_awaitable);
}

inline awaitable<proto::message> receive_message(ar::connection& conn) {
  std::array<std::byte, 64> in{};
  auto n = co_await conn.async_receive(asio::buffer(in), use_awaitable);
  ar::error_code ec;
  auto m = proto::decode(std::span<const std::byte>(in.data(), n), ec);
  BOOST_REQUIRE(!ec);
  co_return m;
}

/// The device under test has no immediate data (iWARP): chunks are told by
/// chunk_written messages, as the library's sender does there.
inline bool chunk_notices() {
  static const bool notices = !ar::test::device_under_test().immediate_data;
  return notices;
}

/// A hello as the library's sender makes it on the device under test.
inline proto::hello hello_for(std::uint32_t chunk, std::uint16_t depth) {
  proto::hello h{chunk, depth};
  h.flags = chunk_notices() ? proto::hello_chunk_notices : 0;
  return h;
}

/// Writes chunk `seq` from `local` into `remote` as the library's sender does: a write
/// with immediate data, or on iWARP a write and its chunk_written message.
inline awaitable<void> write_chunk(ar::connection& conn, const ar::local_buffer& local,
                                   const ar::remote_buffer& remote, std::uint32_t seq) {
  if (!chunk_notices()) {
    co_await conn.async_write_with_imm(local, remote, seq, use_awaitable);
    co_return;
  }
  co_await conn.async_write(local, remote, use_awaitable);
  co_await send_message(conn, proto::chunk_written{seq, local.length});
}

/// The chunk a received message tells of (a write with immediate data, or a
/// chunk_written message decoded from `in`): its sequence and length, if it is one.
inline std::optional<proto::chunk_written> chunk_told(const ar::received_message& r,
                                                      std::span<const std::byte> in) {
  if (r.rdma_write && r.immediate)
    return proto::chunk_written{*r.immediate, static_cast<std::uint32_t>(r.size)};
  if (r.rdma_write)
    return std::nullopt;
  ar::error_code ec;
  auto m = proto::decode(in.first(r.size), ec);
  if (auto* c = std::get_if<proto::chunk_written>(&m))
    return *c;
  return std::nullopt;
}

inline awaitable<proto::hello_ack> handshake(ar::connection& conn) {
  proto::hello hello = hello_for(64 * 1024, 4);
  co_await send_message(conn, hello);
  auto m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::hello_ack>(m));
  co_return std::get<proto::hello_ack>(m);
}

} // namespace ft

using namespace ft;
