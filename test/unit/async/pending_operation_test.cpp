// The library's one pending-operation type (lib/async/pending_operation.hpp), without a
// device: how each delivery runs the handler, the cancellation handler it installs and
// removes, moving a waiting handler, and handing one on.
#define BOOST_TEST_MODULE pending_operation
#include <boost/test/unit_test.hpp>

#include "async/pending_operation.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <optional>
#include <string>

namespace asio = boost::asio;
using asio_rdma::detail::complete_now;
using asio_rdma::detail::delivery;
using asio_rdma::detail::pending_operation;
using boost::system::error_code;
using op_type = pending_operation<void(error_code, std::size_t)>;

BOOST_AUTO_TEST_CASE(direct_runs_the_handler_inside_complete) {
  asio::io_context io;
  std::optional<std::size_t> got;
  op_type op(op_type::handler_type([&](error_code ec, std::size_t n) {
    BOOST_TEST(!ec);
    got = n;
  }));
  BOOST_TEST(static_cast<bool>(op));
  op.complete(io.get_executor(), delivery::direct, error_code(), 7);
  BOOST_TEST((got == 7u));
  BOOST_TEST(!op);
}

BOOST_AUTO_TEST_CASE(post_never_runs_the_handler_inside_complete) {
  asio::io_context io;
  std::optional<std::size_t> got;
  op_type op(op_type::handler_type([&](error_code, std::size_t n) { got = n; }));
  op.complete(io.get_executor(), delivery::post, error_code(), 3);
  BOOST_TEST(!got.has_value());
  io.run();
  BOOST_TEST((got == 3u));
}

BOOST_AUTO_TEST_CASE(dispatch_runs_on_the_handlers_own_executor) {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  bool in_strand = false;
  std::optional<std::size_t> got;
  op_type op(op_type::handler_type(asio::bind_executor(strand, [&](error_code, std::size_t n) {
    in_strand = strand.running_in_this_thread();
    got = n;
  })));
  // Outside the strand, dispatch queues the handler there.
  op.complete(io.get_executor(), delivery::dispatch, error_code(), 5);
  BOOST_TEST(!got.has_value());
  io.run();
  BOOST_TEST((got == 5u));
  BOOST_TEST(in_strand);
}

BOOST_AUTO_TEST_CASE(dispatch_runs_at_once_on_the_handlers_executor) {
  asio::io_context io;
  std::optional<std::size_t> got;
  asio::post(io, [&] {
    op_type op(op_type::handler_type([&](error_code, std::size_t n) { got = n; }));
    op.complete(io.get_executor(), delivery::dispatch, error_code(), 9);
    BOOST_TEST((got == 9u)); // already on the handler's executor
  });
  io.run();
  BOOST_TEST((got == 9u));
}

BOOST_AUTO_TEST_CASE(the_cancellation_handler_runs_while_waiting_and_is_removed_by_complete) {
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<error_code> got;
  op_type op(op_type::handler_type(
      asio::bind_cancellation_slot(signal.slot(), [&](error_code ec, std::size_t) { got = ec; })));
  int cancels = 0;
  op.on_cancel([&](asio::cancellation_type) {
    ++cancels;
    op.complete(io.get_executor(), delivery::post, error_code(asio::error::operation_aborted), 0);
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
  op_type op(op_type::handler_type(
      asio::bind_cancellation_slot(signal.slot(), [](error_code, std::size_t) {})));
  op.on_cancel([](asio::cancellation_type) { BOOST_FAIL("cancelled after ignore_cancel"); });
  op.ignore_cancel();
  signal.emit(asio::cancellation_type::terminal);
  op.complete(io.get_executor(), delivery::direct, error_code(), 0);
}

BOOST_AUTO_TEST_CASE(a_moved_operation_keeps_its_cancellation_handler_until_complete) {
  // The connection moves an operation's pending_operation out of its pooled record before
  // completing it: the cancellation handler must still be removed then.
  asio::io_context io;
  asio::cancellation_signal signal;
  op_type op(op_type::handler_type(
      asio::bind_cancellation_slot(signal.slot(), [](error_code, std::size_t) {})));
  int cancels = 0;
  op.on_cancel([&](asio::cancellation_type) { ++cancels; });
  op_type moved(std::move(op));
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(cancels == 1);
  moved.complete(io.get_executor(), delivery::direct, error_code(), 0);
  signal.emit(asio::cancellation_type::terminal); // after completion: reaches nothing
  BOOST_TEST(cancels == 1);
}

BOOST_AUTO_TEST_CASE(release_removes_this_operations_cancellation_handler) {
  asio::io_context io;
  asio::cancellation_signal signal;
  op_type op(op_type::handler_type(
      asio::bind_cancellation_slot(signal.slot(), [](error_code, std::size_t) {})));
  op.on_cancel([](asio::cancellation_type) { BOOST_FAIL("the released operation was cancelled"); });
  auto handler = op.release();
  signal.emit(asio::cancellation_type::terminal);
  complete_now(io.get_executor(), std::move(handler), delivery::direct, error_code(), 0);
}

BOOST_AUTO_TEST_CASE(complete_on_delivers_on_the_executor_the_operation_kept) {
  // The raw socket keeps its handler's executor (tracking work) while it waits, and
  // completes there without building the executor again.
  asio::io_context io;
  auto strand = asio::make_strand(io);
  bool on_strand = false;
  op_type op(op_type::handler_type(asio::bind_executor(
      strand, [&](error_code, std::size_t) { on_strand = strand.running_in_this_thread(); })));
  auto work = op.tracked_executor(io.get_executor());
  op.complete_on(work, io.get_executor(), delivery::post, error_code(), 3);
  work = {}; // the operation's own copy: the delivery holds what it needs
  BOOST_TEST(!on_strand); // post: never inside the call
  io.run();
  BOOST_TEST(on_strand);
}

BOOST_AUTO_TEST_CASE(without_a_slot_on_cancel_installs_nothing) {
  asio::io_context io;
  bool ran = false;
  op_type op(op_type::handler_type([&](error_code, std::size_t) { ran = true; }));
  op.on_cancel([](asio::cancellation_type) {});
  op.complete(io.get_executor(), delivery::direct, error_code(), 0);
  BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(moving_keeps_the_one_handler_and_empties_the_source) {
  asio::io_context io;
  auto owned = std::make_unique<std::string>("moved along");
  std::string got;
  op_type a(op_type::handler_type(
      [&, s = std::move(owned)](error_code, std::size_t) { got = *s; }));
  op_type b;
  b = std::move(a); // Boost 1.81's own move assignment would wrap the handler in itself
  BOOST_TEST(!a);
  BOOST_TEST(static_cast<bool>(b));
  op_type c(std::move(b));
  BOOST_TEST(!b);
  c.complete(io.get_executor(), delivery::direct, error_code(), 0);
  BOOST_TEST(got == "moved along");
}

BOOST_AUTO_TEST_CASE(release_hands_the_handler_on_unfinished) {
  asio::io_context io;
  bool ran = false;
  op_type op(op_type::handler_type([&](error_code, std::size_t) { ran = true; }));
  auto handler = op.release();
  BOOST_TEST(!op);
  BOOST_TEST(!ran);
  complete_now(io.get_executor(), std::move(handler), delivery::post, error_code(), 1);
  BOOST_TEST(!ran);
  io.run();
  BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(a_handler_may_start_the_next_operation_on_the_same_object) {
  asio::io_context io;
  op_type op;
  int runs = 0;
  op.start(op_type::handler_type([&](error_code, std::size_t) {
    ++runs;
    op.start(op_type::handler_type([&](error_code, std::size_t) { ++runs; }));
  }));
  op.complete(io.get_executor(), delivery::direct, error_code(), 0);
  BOOST_TEST(runs == 1);
  BOOST_TEST(static_cast<bool>(op)); // the next one waits
  op.complete(io.get_executor(), delivery::direct, error_code(), 0);
  BOOST_TEST(runs == 2);
}
