// The file transfer on a real device: single files of awkward sizes, a tree,
// chunk negotiation, hostile and vanishing peers, timeouts and stop(). The module
// goes on in file_transfer_{flow,receiver,resume}_test.cpp.
#define BOOST_TEST_MODULE integration_file_transfer
#include "file_transfer_support.hpp"

#include <boost/test/unit_test.hpp>

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
      // The chunk offered is no larger than the file needs (one page at least).
      BOOST_TEST(r.chunk_size == (name == std::string("big.bin") ? 65536u : 4096u));
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

BOOST_AUTO_TEST_CASE(the_sender_offers_no_larger_chunk_than_its_largest_file_needs) {
  // Start-up: a 1-byte file registers one page on each side, not buffer_size x depth.
  asio::io_context io;
  temp_dir src, dst;
  write_file(src.path / "one", 1, 1);
  write_file(src.path / "t1", 5000, 2);
  auto receiver = make_receiver(io, dst.path, 1024 * 1024);
  pending_receive p;
  start_receive(receiver, p);
  run(io, [&]() -> awaitable<void> {
    auto conn = co_await connect_to(receiver);
    auto options = sender_options(1024 * 1024);
    auto r = co_await ar::async_send_file(conn, src.path / "one", options, use_awaitable);
    BOOST_TEST(r.chunk_size == 4096u);
    r = co_await ar::async_send_file(conn, src.path / "t1", options, use_awaitable);
    BOOST_TEST(r.chunk_size == 8192u); // whole pages
    co_await conn.async_disconnect(asio::as_tuple(use_awaitable));
    co_await wait_until(p.done);
  });
  BOOST_TEST(!p.ec, p.ec.message());
  BOOST_TEST(same_file(src.path / "one", dst.path / "one"));
  BOOST_TEST(same_file(src.path / "t1", dst.path / "t1"));
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

BOOST_AUTO_TEST_CASE(a_batch_stores_its_records_up_to_the_first_refused_one) {
  asio::io_context io;
  temp_dir dst;
  auto receiver = make_receiver(io, dst.path);
  enum class fault { bad_name, bad_checksum };
  for (auto f : {fault::bad_name, fault::bad_checksum}) {
    pending_receive p;
    start_receive(receiver, p);
    run(io, [&]() -> awaitable<void> {
      auto conn = co_await connect_to(receiver);
      auto ack = co_await handshake(conn);
      BOOST_TEST(ack.batch_limit == 64u * 1024); // as large as its connection's messages
      std::vector<std::byte> out(4096);
      proto::batch_builder b(out, 5);
      auto one = b.add(proto::entry_kind::file, 0640, "one", 3);
      std::memcpy(one.data(), "abc", 3);
      b.set_crc(proto::crc32c(0, one));
      auto two = b.add(proto::entry_kind::file, 0600, f == fault::bad_name ? "../two" : "two", 3);
      std::memcpy(two.data(), "def", 3);
      b.set_crc(proto::crc32c(0, two) ^ (f == fault::bad_checksum ? 1u : 0u));
      b.add(proto::entry_kind::file, 0600, "three", 0);
      out.resize(b.finish());
      co_await conn.async_send(asio::buffer(out), use_awaitable);
      auto m = co_await receive_message(conn);
      BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
      BOOST_TEST(std::get<proto::status>(m).file_id == 6u); // the second record
      BOOST_TEST((std::get<proto::status>(m).code ==
                  (f == fault::bad_name ? proto::status_code::bad_name
                                        : proto::status_code::checksum_mismatch)));
      co_await wait_until(p.done);
    });
    BOOST_TEST((p.ec == ar::errc::protocol_error), p.ec.message());
    // The record before the refused one is stored, none after it.
    BOOST_TEST(p.result.files.size() == 1u);
    BOOST_TEST(listing(dst.path) == std::vector<std::string>{"one"},
               boost::test_tools::per_element());
    BOOST_TEST(read_file(dst.path / "one").size() == 3u);
    fs::remove(dst.path / "one");
  }
}

BOOST_AUTO_TEST_CASE(a_commit_refused_by_the_filesystem_is_store_failed_and_names_the_step) {
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
    // Not the generic remote_failure: the receiver had the whole file.
    BOOST_TEST((ec == ar::errc::store_failed), ec.message());
    BOOST_TEST(!conn.is_open()); // the sender closed the stream
    co_await wait_until(p.done);
  });
  BOOST_TEST((p.ec == boost::system::errc::is_a_directory), p.ec.message());
  // What the receiver logs: the step, the name and the filesystem's error.
  BOOST_TEST(p.result.failure == "storing f: rename to the final name: Is a directory");
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
    co_await send_message(conn, b); // accepted: no answer
    ar::memory_region local(conn, ack.chunk_size, ar::access::local_write);
    co_await write_chunk(conn, local.slice(), ack.buffer.slice(0, ack.chunk_size), 0);
    auto m = co_await receive_message(conn); // the credit: the chunk is on disk
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
    co_await wait_for_temporary(dst.path);
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
  // The receiver sees the sender's close as an error, or as a sender leaving between
  // files: the close waits until the peer acknowledged the messages that completed before
  // it (connection_options::send_completion), and on iWARP (TCP below) a close before the
  // first file looks the same. Nothing is stored either way.
  BOOST_TEST_MESSAGE("the receiver saw: " << p.ec.message());
  BOOST_TEST(p.result.files.empty());
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
