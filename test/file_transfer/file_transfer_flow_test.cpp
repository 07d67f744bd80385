// The file transfer protocol driven by hand against a real receiver or sender:
// checksums and sizes in file_end, the negotiated depth and credits, pipelining,
// what is not a directory.
#include "file_transfer_support.hpp"

#include <boost/test/unit_test.hpp>

namespace {

/// Handshake with an explicit offer.
awaitable<proto::hello_ack> handshake_with(ar::connection& conn, std::uint32_t chunk,
                                           std::uint16_t depth) {
  proto::hello hello = hello_for(chunk, depth);
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
  co_await send_message(conn, b); // accepted: no answer
  ar::memory_region local(conn, size, ar::access::local_write);
  for (std::size_t i = 0; i < size; ++i)
    local.data()[i] = ar::test::pattern(9, i);
  std::size_t chunks = (size + ack.chunk_size - 1) / ack.chunk_size;
  BOOST_REQUIRE(chunks <= ack.slots); // every chunk in its own slot, all in flight at once
  for (std::size_t seq = 0; seq < chunks; ++seq) {
    std::size_t offset = seq * ack.chunk_size;
    std::size_t length = std::min<std::size_t>(ack.chunk_size, size - offset);
    co_await write_chunk(conn, local.slice(offset, length),
                         ack.buffer.slice(seq * ack.chunk_size, length),
                         static_cast<std::uint32_t>(seq));
  }
  // The credits of all but the last chunk; the last one's comes with the status.
  for (std::size_t seq = 0; seq + 1 < chunks; ++seq) {
    auto m = co_await receive_message(conn);
    BOOST_REQUIRE(std::holds_alternative<proto::credit>(m));
    BOOST_TEST(std::get<proto::credit>(m).sequence == seq);
  }
  std::uint32_t crc = proto::crc32c(0, local.data());
  proto::file_end e{0, fault == file_end_fault::wrong_crc ? crc ^ 1u : crc,
                    fault == file_end_fault::wrong_size ? size + 1 : size};
  co_await send_message(conn, e);
  auto m = co_await receive_message(conn);
  BOOST_REQUIRE(std::holds_alternative<proto::status>(m));
  if (std::get<proto::status>(m).code == proto::status_code::ok)
    BOOST_TEST(std::get<proto::status>(m).credited == chunks);
  co_return std::get<proto::status>(m).code;
}

/// The next message or RDMA write with immediate on `conn`, into `in`;
/// operation_aborted if none comes within `limit`.
awaitable<std::tuple<ar::error_code, ar::received_message>>
receive_within(ar::connection& conn, std::span<std::byte> in, std::chrono::milliseconds limit) {
  asio::cancellation_signal cancel;
  asio::steady_timer t(conn.get_executor(), limit);
  t.async_wait([&cancel](ar::error_code e) {
    if (!e)
      cancel.emit(asio::cancellation_type::terminal);
  });
  auto r = co_await conn.async_receive_message(
      asio::buffer(in.data(), in.size()),
      asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(use_awaitable)));
  t.cancel();
  co_return r;
}

/// The next message on `conn` (decoded from `in`), or a chunk's write (returned as a
/// credit with the chunk's sequence), within 10 s.
awaitable<proto::message> next_from(ar::connection& conn, std::span<std::byte> in) {
  auto [ec, r] = co_await receive_within(conn, in, std::chrono::seconds(10));
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  if (auto chunk = chunk_told(r, in))
    co_return proto::credit{chunk->sequence};
  BOOST_REQUIRE(!r.rdma_write);
  ar::error_code dec;
  auto decoded = proto::decode(std::span<const std::byte>(in.data(), r.size), dec);
  BOOST_REQUIRE(!dec);
  co_return decoded;
}

/// The library's sender, run against a receiver by hand: what it ended with.
struct real_sender {
  bool done = false;
  ar::error_code ec;
  ar::transfer_result result;
  ar::connection connection;
};

/// Starts the library's sender of `path` (a tree if `tree`) towards
/// `acceptor` and returns the accepted connection, the hand receiver's end.
awaitable<ar::connection> start_real_sender(ar::acceptor& acceptor, fs::path path, bool tree,
                                            ar::file_transfer_options options, real_sender& s) {
  auto ex = co_await asio::this_coro::executor;
  const auto port = acceptor.local_endpoint().port();
  asio::co_spawn(
      ex,
      [&s, ex, port, path, tree, options]() -> awaitable<void> {
        ar::connection_options o;
        o.timeout = std::chrono::seconds(10);
        s.connection = co_await ar::async_connect(ex, device_address(), port, o, use_awaitable);
        auto [ec, r] = tree ? co_await ar::async_send_tree(s.connection, path, options,
                                                           asio::as_tuple(use_awaitable))
                            : co_await ar::async_send_file(s.connection, path, options,
                                                           asio::as_tuple(use_awaitable));
        s.ec = ec;
        s.result = r;
        s.done = true;
      },
      ar::test::report_failure);
  co_return co_await acceptor.async_accept(use_awaitable);
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
  // Large enough for the sender to offer all of its buffer and depth (it
  // offers no more than its files need).
  const std::size_t size = 8 * 64 * 1024 + 5;
  const std::size_t chunks = (size + chunk - 1) / chunk;
  write_file(src.path / "f", size, 7);
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, device_address(), 0);
    // The real sender, offering depth 8.
    auto options = sender_options(64 * 1024);
    options.depth = 8;
    real_sender sender;
    // A receiver by hand that grants 3 slots and holds its credits back.
    auto server = co_await start_real_sender(acceptor, src.path / "f", false, options, sender);
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

    std::array<std::byte, 64> in{};
    auto next_write = [&](std::chrono::milliseconds limit) {
      return receive_within(server, in, limit);
    };
    std::uint32_t crc = 0;
    auto take = [&](std::uint32_t seq) -> awaitable<void> {
      auto [ec, w] = co_await next_write(std::chrono::seconds(10));
      BOOST_REQUIRE_MESSAGE(!ec, "chunk " << seq << ": " << ec.message());
      auto told = chunk_told(w, in);
      BOOST_REQUIRE(told.has_value());
      BOOST_TEST(told->sequence == seq);
      auto length = std::min<std::size_t>(chunk, size - std::size_t(seq) * chunk);
      BOOST_TEST(told->length == length);
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
    co_await send_message(
        server, proto::status{0, proto::status_code::ok, static_cast<std::uint32_t>(chunks)});
    co_await wait_until(sender.done);
    BOOST_TEST(!sender.ec, sender.ec.message());
    BOOST_TEST(sender.result.chunk_size == chunk);
    BOOST_TEST(sender.result.bytes == size);
  });
}

BOOST_AUTO_TEST_CASE(the_sender_sends_the_next_entry_before_the_answers_to_the_last) {
  // Pipelining: the receiver's answers are not awaited between entries. Chunks
  // are numbered over the transfer and go round the slots, so a chunk waits
  // only for its slot's credit, which a file's status may carry.
  asio::io_context io;
  temp_dir src;
  fs::create_directory(src.path / "t");
  write_file(src.path / "t" / "a", 100, 1);
  write_file(src.path / "t" / "b", 200, 2);
  write_file(src.path / "t" / "c", 300, 3);
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, device_address(), 0);
    real_sender sender;
    auto server =
        co_await start_real_sender(acceptor, src.path / "t", true, sender_options(), sender);
    constexpr std::uint32_t chunk = 4096;
    ar::memory_region region(server, chunk * 2, ar::access::local_write | ar::access::remote_write);
    auto m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::hello>(m));
    co_await send_message(server, proto::hello_ack{chunk, 2, region.remote()});
    std::array<std::byte, proto::max_message_size> in{};
    auto next = [&] { return next_from(server, in); };
    auto expect_begin = [&](std::uint32_t id) -> awaitable<std::uint64_t> {
      auto b = co_await next();
      BOOST_REQUIRE(std::holds_alternative<proto::file_begin>(b));
      BOOST_TEST(std::get<proto::file_begin>(b).file_id == id);
      co_return std::get<proto::file_begin>(b).size;
    };
    auto expect_chunk_and_end = [&](std::uint32_t seq, std::uint32_t id) -> awaitable<void> {
      auto w = co_await next();
      BOOST_REQUIRE(std::holds_alternative<proto::credit>(w));
      BOOST_TEST(std::get<proto::credit>(w).sequence == seq);
      auto e = co_await next();
      BOOST_REQUIRE(std::holds_alternative<proto::file_end>(e));
      BOOST_TEST(std::get<proto::file_end>(e).file_id == id);
    };
    // Not one answer yet, and the sender has sent the directory and two files
    // whole (chunks 0 and 1, one per slot), and the third file's begin.
    co_await expect_begin(0);
    std::uint64_t sizes = co_await expect_begin(1);
    co_await expect_chunk_and_end(0, 1);
    sizes += co_await expect_begin(2);
    co_await expect_chunk_and_end(1, 2);
    sizes += co_await expect_begin(3);
    BOOST_TEST(sizes == 600u);
    // The third file's chunk (2) goes to slot 0: it waits for chunk 0's credit.
    auto [quiet, extra] = co_await receive_within(server, in, std::chrono::milliseconds(500));
    BOOST_TEST((quiet == asio::error::operation_aborted), "a chunk came before its slot was free");
    co_await send_message(server, proto::status{0, proto::status_code::ok, 0}); // the directory
    co_await send_message(server, proto::status{1, proto::status_code::ok, 1}); // credits chunk 0
    co_await expect_chunk_and_end(2, 3);
    co_await send_message(server, proto::status{2, proto::status_code::ok, 2});
    co_await send_message(server, proto::status{3, proto::status_code::ok, 3});
    co_await wait_until(sender.done);
    BOOST_TEST(!sender.ec, sender.ec.message());
    BOOST_TEST(sender.result.files == 4u);
    BOOST_TEST(sender.result.bytes == 600u);
    BOOST_TEST(sender.result.bytes_sent == 600u);
  });
}

BOOST_AUTO_TEST_CASE(small_entries_travel_whole_in_batches_no_larger_than_the_receiver_takes) {
  // A directory and ten files of 1000 bytes go in file_batch messages of at
  // most the receiver's batch_limit (4 records each here), each answered by
  // one status; the file too large for a batch goes in chunks.
  asio::io_context io;
  temp_dir src;
  fs::create_directory(src.path / "t");
  for (int i = 0; i < 10; ++i)
    write_file(src.path / "t" / ("f" + std::to_string(i)), 1000, i);
  write_file(src.path / "t" / "z", 10000, 99);
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, device_address(), 0);
    real_sender sender;
    auto server =
        co_await start_real_sender(acceptor, src.path / "t", true, sender_options(), sender);
    constexpr std::uint32_t chunk = 4096;
    constexpr std::uint32_t limit = proto::max_message_size; // the least a receiver takes
    ar::memory_region region(server, chunk * 3, ar::access::local_write | ar::access::remote_write);
    auto m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::hello>(m));
    co_await send_message(server, proto::hello_ack{chunk, 3, region.remote(), limit});
    std::vector<std::byte> in(limit); // a larger batch would not fit: the receive would fail
    std::vector<std::string> names;
    std::uint32_t next_id = 0;
    std::uint32_t chunks = 0; // seen so far: each status credits all of them
    int batches = 0;
    while (next_id < 12) { // the entries in the order the sender lists them
      auto decoded = co_await next_from(server, in);
      if (auto* begin = std::get_if<proto::file_begin>(&decoded)) {
        // The large file, in chunks: three of them, one per slot.
        BOOST_TEST(begin->file_id == next_id);
        BOOST_TEST(begin->name == "t/z");
        BOOST_TEST(begin->size == 10000u);
        names.emplace_back(begin->name);
        for (int i = 0; i < 3; ++i, ++chunks) {
          auto chunk = co_await next_from(server, in);
          BOOST_REQUIRE(std::holds_alternative<proto::credit>(chunk));
          BOOST_TEST(std::get<proto::credit>(chunk).sequence == chunks);
        }
        auto end = co_await receive_message(server);
        BOOST_REQUIRE(std::holds_alternative<proto::file_end>(end));
        // The id taken before the co_await: clang warned of unsequenced modifications of
        // next_id inside it (-Wunsequenced, the sanitizer build).
        const auto id = next_id++;
        co_await send_message(server, proto::status{id, proto::status_code::ok, chunks});
        continue;
      }
      BOOST_REQUIRE(std::holds_alternative<proto::file_batch>(decoded));
      auto& batch = std::get<proto::file_batch>(decoded);
      ++batches;
      BOOST_TEST(batch.first_file_id == next_id);
      auto rest = batch.records;
      proto::batch_record record;
      for (std::uint16_t i = 0; i < batch.count; ++i) {
        BOOST_REQUIRE(proto::take_record(rest, next_id++, record));
        names.emplace_back(record.entry.name);
        if (record.entry.kind == proto::entry_kind::directory)
          continue;
        auto want = read_file(src.path / record.entry.name);
        BOOST_TEST(record.data.size() == want.size());
        BOOST_TEST(std::memcmp(record.data.data(), want.data(), want.size()) == 0);
        BOOST_TEST(record.crc32c == proto::crc32c(0, record.data));
      }
      co_await send_message(server, proto::status{next_id - 1, proto::status_code::ok, chunks});
    }
    // 4 files of 1000 bytes fill a batch of 4124 bytes: 3 batches, or more
    // where the large file splits a run.
    BOOST_TEST(batches >= 3);
    BOOST_TEST(batches <= 5);
    std::vector<std::string> expected{"t", "t/z"};
    for (int i = 0; i < 10; ++i)
      expected.push_back("t/f" + std::to_string(i));
    std::sort(expected.begin(), expected.end());
    std::sort(names.begin(), names.end());
    BOOST_TEST(names == expected, boost::test_tools::per_element());
    co_await wait_until(sender.done);
    BOOST_TEST(!sender.ec, sender.ec.message());
    BOOST_TEST(sender.result.files == 12u);
    BOOST_TEST(sender.result.bytes == 20000u);
    BOOST_TEST(sender.result.bytes_sent == 20000u);
  });
}

BOOST_AUTO_TEST_CASE(a_status_that_credits_more_than_its_file_sent_is_a_protocol_error) {
  asio::io_context io;
  temp_dir src;
  write_file(src.path / "f", 100, 1);
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::acceptor acceptor(ex, device_address(), 0);
    real_sender sender;
    auto server =
        co_await start_real_sender(acceptor, src.path / "f", false, sender_options(), sender);
    ar::memory_region region(server, 4096, ar::access::local_write | ar::access::remote_write);
    auto m = co_await receive_message(server);
    BOOST_REQUIRE(std::holds_alternative<proto::hello>(m));
    co_await send_message(server, proto::hello_ack{4096, 1, region.remote()});
    std::array<std::byte, proto::max_message_size> in{};
    for (int i = 0; i < 3; ++i) { // begin, the chunk, end
      auto [ec, r] = co_await receive_within(server, in, std::chrono::seconds(10));
      BOOST_REQUIRE_MESSAGE(!ec, ec.message());
    }
    co_await send_message(server, proto::status{0, proto::status_code::ok, 2}); // 1 chunk was sent
    co_await wait_until(sender.done);
    BOOST_TEST((sender.ec == ar::errc::protocol_error), sender.ec.message());
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
