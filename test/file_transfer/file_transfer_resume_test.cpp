// Resumable transfers on a real device: an interrupted file continues from its verified
// prefix, kept temporaries expire, and an offset the receiver did not offer is refused.
#include "file_transfer_support.hpp"

#include <boost/test/unit_test.hpp>

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
