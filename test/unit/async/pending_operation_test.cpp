// The library's one pending-operation type (include/asio_rdma/detail/pending_operation.hpp),
// without a device: how it decides to run the handler from where the completion comes
// from and where the handler runs, the cancellation handler it installs and removes, and
// moving a waiting handler, and where it keeps the handler.
#define BOOST_TEST_MODULE pending_operation
#include <boost/test/unit_test.hpp>

#include "block_counting_allocator.hpp"

#include <asio_rdma/detail/pending_operation.hpp>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <memory>
#include <optional>
#include <string>

namespace asio = boost::asio;
using asio_rdma::detail::from;
using asio_rdma::detail::pending_operation;
using boost::system::error_code;
using op_type = pending_operation<void(error_code, std::size_t)>;
using counting_allocator = asio_rdma::test::block_counting_allocator<void>;

BOOST_AUTO_TEST_CASE(a_handler_on_the_io_executor_runs_inside_a_completion_path) {
  asio::io_context io;
  std::optional<std::size_t> got;
  op_type op([&](error_code ec, std::size_t n) {
    BOOST_TEST(!ec);
    got = n;
  }, io.get_executor());
  BOOST_TEST(static_cast<bool>(op));
  op.complete(io.get_executor(), from::completion_path, error_code(), 7);
  BOOST_TEST((got == 7u)); // called directly, as Asio's own operations do
  BOOST_TEST(!op);
}

BOOST_AUTO_TEST_CASE(a_users_call_never_runs_the_handler_inside_it) {
  asio::io_context io;
  std::optional<std::size_t> got;
  op_type op([&](error_code, std::size_t n) { got = n; }, io.get_executor());
  op.complete(io.get_executor(), from::user_call, error_code(), 3);
  BOOST_TEST(!got.has_value());
  io.run();
  BOOST_TEST((got == 3u));
}

BOOST_AUTO_TEST_CASE(a_handler_with_its_own_executor_is_dispatched_there) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  bool in_strand = false;
  std::optional<std::size_t> got;
  op_type op(asio::bind_executor(strand,
                                 [&](error_code, std::size_t n) {
                                   in_strand = strand.running_in_this_thread();
                                   got = n;
                                 }),
             io.get_executor());
  // From a completion path outside the strand: queued there, not called.
  op.complete(io.get_executor(), from::completion_path, error_code(), 5);
  BOOST_TEST(!got.has_value());
  io.run();
  BOOST_TEST((got == 5u));
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_type_erased_executor_runs_directly_only_on_the_io_one) {
  // runs_on compares two io_context executors inside any_io_executors as themselves: the
  // same io_context's is the I/O executor; another io_context's, or a strand's of the same
  // io_context, is not (it is dispatched there).
  asio::io_context io, other;
  const asio::any_io_executor same = io.get_executor();
  const asio::any_io_executor elsewhere = other.get_executor();
  const asio::any_io_executor on_strand = asio::make_strand(io);
  auto ran_inside = [&](const asio::any_io_executor& bound) {
    bool got = false;
    op_type op(asio::bind_executor(bound, [&](error_code, std::size_t) { got = true; }),
               io.get_executor());
    op.complete(io.get_executor(), from::completion_path, error_code(), 1);
    const bool inside = got;
    io.restart();
    io.run();
    other.restart();
    other.run();
    BOOST_TEST(got); // it ran in the end, wherever it belongs
    return inside;
  };
  BOOST_TEST(ran_inside(same));
  BOOST_TEST(!ran_inside(elsewhere));
  BOOST_TEST(!ran_inside(on_strand));
}

BOOST_AUTO_TEST_CASE(a_type_erased_handler_is_dispatched_at_once_on_its_executor) {
  // A handler the library hands on arrives erased: not known to run on the I/O executor,
  // it is dispatched, which runs it at once when the caller already runs there.
  asio::io_context io;
  std::optional<std::size_t> got;
  asio::post(io, [&] {
    op_type op(op_type::handler_type([&](error_code, std::size_t n) { got = n; }));
    op.complete(io.get_executor(), from::completion_path, error_code(), 9);
    BOOST_TEST((got == 9u));
  });
  io.run();
  BOOST_TEST((got == 9u));
}

BOOST_AUTO_TEST_CASE(the_cancellation_handler_runs_while_waiting_and_is_removed_by_complete) {
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<error_code> got;
  op_type op(asio::bind_cancellation_slot(signal.slot(),
                                          [&](error_code ec, std::size_t) { got = ec; }),
             io.get_executor());
  int cancels = 0;
  op.on_cancel([&](asio::cancellation_type) {
    ++cancels;
    op.complete(io.get_executor(), from::user_call, error_code(asio::error::operation_aborted), 0);
  });
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(cancels == 1);
  // complete() removed the cancellation handler: a late signal reaches nothing.
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(cancels == 1);
  io.run();
  BOOST_TEST((got == error_code(asio::error::operation_aborted)));
}

BOOST_AUTO_TEST_CASE(ignore_cancel_removes_the_cancellation_handler) {
  asio::io_context io;
  asio::cancellation_signal signal;
  op_type op(asio::bind_cancellation_slot(signal.slot(), [](error_code, std::size_t) {}),
             io.get_executor());
  op.on_cancel([](asio::cancellation_type) { BOOST_FAIL("cancelled after ignore_cancel"); });
  op.ignore_cancel();
  signal.emit(asio::cancellation_type::terminal);
  op.complete(io.get_executor(), from::completion_path, error_code(), 0);
}

BOOST_AUTO_TEST_CASE(a_moved_operation_keeps_its_cancellation_handler_until_complete) {
  // The connection moves an operation's pending_operation out of its pooled record before
  // completing it: the cancellation handler must still be removed then.
  asio::io_context io;
  asio::cancellation_signal signal;
  op_type op(asio::bind_cancellation_slot(signal.slot(), [](error_code, std::size_t) {}),
             io.get_executor());
  int cancels = 0;
  op.on_cancel([&](asio::cancellation_type) { ++cancels; });
  op_type moved(std::move(op));
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(cancels == 1);
  moved.complete(io.get_executor(), from::completion_path, error_code(), 0);
  signal.emit(asio::cancellation_type::terminal); // after completion: reaches nothing
  BOOST_TEST(cancels == 1);
}

BOOST_AUTO_TEST_CASE(complete_on_delivers_on_the_executor_the_operation_kept) {
  // The raw socket keeps its handler's executor (tracking work) while it waits, and
  // completes there without building the executor again.
  asio::io_context io;
  auto strand = asio::make_strand(io);
  bool on_strand = false;
  op_type op(asio::bind_executor(
                 strand, [&](error_code, std::size_t) { on_strand = strand.running_in_this_thread(); }),
             io.get_executor());
  auto work = op.tracked_executor(io.get_executor());
  op.complete_on(work, io.get_executor(), from::user_call, error_code(), 3);
  work = {}; // the operation's own copy: the delivery holds what it needs
  BOOST_TEST(!on_strand); // a user's call: never inside it
  io.run();
  BOOST_TEST(on_strand);
}

BOOST_AUTO_TEST_CASE(without_a_slot_on_cancel_installs_nothing) {
  asio::io_context io;
  bool ran = false;
  op_type op([&](error_code, std::size_t) { ran = true; }, io.get_executor());
  op.on_cancel([](asio::cancellation_type) {});
  op.complete(io.get_executor(), from::completion_path, error_code(), 0);
  BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(moving_keeps_the_one_handler_and_where_it_runs) {
  asio::io_context io;
  auto owned = std::make_unique<std::string>("moved along");
  std::string got;
  op_type a([&, s = std::move(owned)](error_code, std::size_t) { got = *s; }, io.get_executor());
  op_type b;
  b = std::move(a); // Boost 1.81's own move assignment would wrap the handler in itself
  BOOST_TEST(!a);
  BOOST_TEST(static_cast<bool>(b));
  op_type c(std::move(b));
  BOOST_TEST(!b);
  // Still known to run on the I/O executor: called directly from a completion path.
  c.complete(io.get_executor(), from::completion_path, error_code(), 0);
  BOOST_TEST(got == "moved along");
}

BOOST_AUTO_TEST_CASE(a_handler_may_start_the_next_operation_on_the_same_object) {
  asio::io_context io;
  op_type op;
  int runs = 0;
  op = op_type(
      [&](error_code, std::size_t) {
        ++runs;
        op = op_type([&](error_code, std::size_t) { ++runs; }, io.get_executor());
      },
      io.get_executor());
  op.complete(io.get_executor(), from::completion_path, error_code(), 0);
  BOOST_TEST(runs == 1);
  BOOST_TEST(static_cast<bool>(op)); // the next one waits
  op.complete(io.get_executor(), from::completion_path, error_code(), 0);
  BOOST_TEST(runs == 2);
}

// Where the handler is kept (detail/inline_handler.hpp): in place when small and moving
// without throwing, else as an any_completion_handler in memory from its allocator.

namespace {
/// A handler whose move is not declared noexcept.
struct throwing_move_handler {
  int* calls;
  explicit throwing_move_handler(int* c) : calls(c) {}
  throwing_move_handler(throwing_move_handler&& o) noexcept(false) : calls(o.calls) {}
  void operator()(error_code, std::size_t) && { ++*calls; }
};
} // namespace

using kept = asio_rdma::detail::inline_handler<void(error_code, std::size_t)>;

BOOST_AUTO_TEST_CASE(a_coroutines_handler_and_bound_handlers_are_kept_in_place) {
  using coroutine_handler =
      asio::async_result<asio::use_awaitable_t<>, void(error_code, std::size_t)>::handler_type;
  static_assert(kept::kept_in_place<coroutine_handler>);
  auto lambda = [p = static_cast<int*>(nullptr)](error_code, std::size_t) { (void)p; };
  static_assert(kept::kept_in_place<decltype(lambda)>);
  asio::cancellation_signal signal;
  using bound = decltype(asio::bind_cancellation_slot(
      signal.slot(), asio::bind_allocator(counting_allocator(nullptr), lambda)));
  static_assert(kept::kept_in_place<bound>);
  static_assert(!kept::kept_in_place<throwing_move_handler>);
}

namespace {
/// An AsyncReadStream and AsyncWriteStream whose operations only say whether their
/// handler (asio::async_read's or async_write's operation, for a composed call) would
/// be kept in place.
struct handler_probe_stream {
  using executor_type = asio::any_io_executor;
  executor_type ex;
  bool* kept_in_place;
  executor_type get_executor() const { return ex; }
  template <typename Buffers, typename Token> auto async_read_some(const Buffers&, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(probe{kept_in_place}, token);
  }
  template <typename Buffers, typename Token> auto async_write_some(const Buffers&, Token&& token) {
    return asio::async_initiate<Token, void(error_code, std::size_t)>(probe{kept_in_place}, token);
  }
  struct probe {
    bool* kept_in_place;
    template <typename Handler> void operator()(Handler&&) const {
      *kept_in_place = kept::kept_in_place<std::decay_t<Handler>>;
    }
  };
};
} // namespace

// A stream's reads and writes through asio::async_read / async_write from a coroutine
// (stream.hpp): the composed operation holds the stream, the buffer, the bytes so far, its
// cancellation state and the coroutine's handler (56 bytes), and is kept in place too,
// taking no block from Asio's recycling cache per operation.
BOOST_AUTO_TEST_CASE(asio_async_read_and_async_write_around_a_coroutine_are_kept_in_place) {
  asio::io_context io;
  bool read_kept = false, write_kept = false;
  handler_probe_stream reader{io.get_executor(), &read_kept};
  handler_probe_stream writer{io.get_executor(), &write_kept};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::array<char, 8> buffer{};
        // Each operation never completes: the probe only looks at its handler, and the
        // coroutine is destroyed with the io_context. Two coroutines, one per operation.
        co_await asio::async_read(reader, asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::array<char, 8> buffer{};
        co_await asio::async_write(writer, asio::buffer(buffer), asio::use_awaitable);
      },
      asio::detached);
  io.run();
  BOOST_TEST(read_kept);
  BOOST_TEST(write_kept);
}

BOOST_AUTO_TEST_CASE(a_small_handler_takes_no_memory_from_its_allocator) {
  asio::io_context io;
  std::size_t blocks = 0;
  std::optional<std::size_t> got;
  op_type op(asio::bind_allocator(counting_allocator(&blocks),
                                  [&](error_code, std::size_t n) { got = n; }),
             io.get_executor());
  op_type moved(std::move(op));
  moved.complete(io.get_executor(), from::completion_path, error_code(), 4);
  BOOST_TEST((got == 4u));
  BOOST_TEST(blocks == 0u);
}

BOOST_AUTO_TEST_CASE(a_large_handler_is_type_erased_in_its_allocators_memory_and_runs_once) {
  asio::io_context io;
  std::size_t blocks = 0;
  int calls = 0;
  std::array<char, 64> large{};
  large[0] = 'x';
  op_type op(asio::bind_allocator(counting_allocator(&blocks),
                                  [&calls, large](error_code, std::size_t) {
                                    BOOST_TEST(large[0] == 'x');
                                    ++calls;
                                  }),
             io.get_executor());
  BOOST_TEST(blocks == 1u);
  op_type moved(std::move(op));
  BOOST_TEST(!op);
  moved.complete(io.get_executor(), from::completion_path, error_code(), 0);
  BOOST_TEST(calls == 1);
  BOOST_TEST(!moved);
  BOOST_TEST(blocks == 1u);
}

BOOST_AUTO_TEST_CASE(a_handler_whose_move_may_throw_is_type_erased_and_runs_once) {
  asio::io_context io;
  int calls = 0;
  op_type op(throwing_move_handler(&calls), io.get_executor());
  op_type moved(std::move(op));
  moved.complete(io.get_executor(), from::user_call, error_code(), 0);
  io.run();
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(a_handler_never_called_is_destroyed_once) {
  asio::io_context io;
  auto owned = std::make_shared<int>(1);
  {
    op_type small([o = owned](error_code, std::size_t) {}, io.get_executor());
    std::array<char, 64> large{};
    op_type big([o = owned, large](error_code, std::size_t) { (void)large; }, io.get_executor());
    BOOST_TEST(owned.use_count() == 3);
    op_type moved(std::move(small));
    BOOST_TEST(owned.use_count() == 3); // moved, not copied
  }
  BOOST_TEST(owned.use_count() == 1);
}

BOOST_AUTO_TEST_CASE(release_hands_on_the_handler_type_erased_and_unfinished) {
  asio::io_context io;
  std::optional<std::size_t> got;
  op_type op([&](error_code, std::size_t n) { got = n; }, io.get_executor());
  op_type::handler_type handed = op.release();
  BOOST_TEST(!op);
  BOOST_TEST(!got.has_value());
  std::move(handed)(error_code(), 6);
  BOOST_TEST((got == 6u));
}

BOOST_AUTO_TEST_CASE(a_small_handlers_executor_is_its_own) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  static_assert(kept::kept_in_place<decltype(asio::bind_executor(strand, [](error_code, std::size_t) {}))>);
  op_type op(asio::bind_executor(strand, [](error_code, std::size_t) {}), io.get_executor());
  auto work = op.tracked_executor(io.get_executor());
  bool on_strand = false;
  asio::dispatch(work, [&] { on_strand = strand.running_in_this_thread(); });
  work = {}; // it tracks work: io.run() would not return
  io.run();
  BOOST_TEST(on_strand);
}
