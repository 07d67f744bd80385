// The receiving server's policies on a real device: durability, the overwrite policy,
// size limits, authentication, per-peer limits and progress reports.
#include "file_transfer_support.hpp"

#include <boost/test/unit_test.hpp>

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

// -- Filesystems (issue 25): NFS, CIFS and 9p refuse RENAME_NOREPLACE.

/// The type of the filesystem `path` lies on, from the mount table (statfs
/// will not do: 9p passes the host filesystem's magic through).
std::string mount_type(const fs::path& path) {
  const std::string where = fs::canonical(path).string();
  std::ifstream mounts("/proc/self/mounts");
  std::string device, point, type, rest, best_point, best_type;
  while (mounts >> device >> point >> type && std::getline(mounts, rest)) {
    bool below =
        where == point || point == "/" || (where.starts_with(point) && where[point.size()] == '/');
    if (below && point.size() >= best_point.size()) {
      best_point = point;
      best_type = type;
    }
  }
  return best_type;
}

BOOST_AUTO_TEST_CASE(the_commit_method_fits_the_receiving_filesystem) {
  asio::io_context io;
  temp_dir dst;
  const std::string type = mount_type(dst.path);
  auto receiver = make_receiver(io, dst.path);
  const bool link = receiver.commit_method() == ar::commit_method::link_unlink;
  BOOST_TEST_MESSAGE("receive directory on " << type << ", commit by "
                                             << (link ? "link + unlink" : "renameat2"));
  for (const char* t : {"9p", "nfs", "nfs4", "cifs", "smb3"})
    if (type == t)
      BOOST_TEST(link, type << " has no RENAME_NOREPLACE: link + unlink expected");
  for (const char* t : {"tmpfs", "ext4", "xfs", "btrfs", "overlay"})
    if (type == t)
      BOOST_TEST(!link, type << " has RENAME_NOREPLACE");
  // The probe left nothing behind.
  BOOST_TEST(fs::is_empty(dst.path));
}

BOOST_AUTO_TEST_CASE(a_directory_that_cannot_store_files_is_refused_when_the_receiver_starts) {
  asio::io_context io;
  temp_dir mountpoint;
  // Read-only for everyone, root included (the test runs as root in the VM).
  BOOST_REQUIRE_MESSAGE(::mount("tmpfs", mountpoint.path.c_str(), "tmpfs", MS_RDONLY, "size=1m") ==
                            0,
                        "mount tmpfs: " << std::strerror(errno));
  struct unmount {
    fs::path p;
    ~unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount_at_end{mountpoint.path};
  try {
    make_receiver(io, mountpoint.path);
    BOOST_FAIL("a receiver started on a read-only directory");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST((e.code() == boost::system::errc::read_only_file_system), e.code().message());
    // Boost appends " [system:30]" to what().
    BOOST_TEST(std::string(e.what()).starts_with("cannot store files in " +
                                                 mountpoint.path.string() +
                                                 ": create a file: Read-only file system"),
               e.what());
  }
  try {
    make_receiver(io, mountpoint.path / "absent");
    BOOST_FAIL("a receiver started on a missing directory");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST((e.code() == boost::system::errc::no_such_file_or_directory));
    BOOST_TEST(std::string(e.what()).starts_with("cannot store files in "));
  }
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
    proto::hello hello = hello_for(64 * 1024, 4);
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
    co_await wait_for_temporary(dst.path);
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
