// The fd waiter (lib/async/fd_waiter.hpp) on a pipe, without a device: it calls back
// while interest is declared and leaves no work when none is; its wait's memory is a
// block of its own (handler_block_allocator), which outlives the waiter and the
// io_context when a wait is still pending.
#define BOOST_TEST_MODULE fd_waiter
#include <boost/test/unit_test.hpp>

#include "async/fd_waiter.hpp"

#include <boost/asio/io_context.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>

namespace asio = boost::asio;
using asio_rdma::detail::callback;
using asio_rdma::detail::fd_waiter;
using asio_rdma::detail::handler_block;
using asio_rdma::detail::handler_block_allocator;

namespace {

struct pipe_pair {
  int fds[2] = {-1, -1};
  pipe_pair() { BOOST_REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0); }
  ~pipe_pair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void write_byte() const { BOOST_REQUIRE(::write(fds[1], "x", 1) == 1); }
  bool read_byte() const {
    char c;
    return ::read(fds[0], &c, 1) == 1;
  }
};

// Reads one byte per call and writes the next, `remaining` times, then stops listening.
struct reader {
  const pipe_pair* pipe;
  fd_waiter* waiter = nullptr;
  int calls = 0;
  int remaining = 0;
  static void on_readable(void* self) {
    auto* r = static_cast<reader*>(self);
    ++r->calls;
    BOOST_TEST(r->pipe->read_byte());
    if (--r->remaining > 0)
      r->pipe->write_byte();
    else
      r->waiter->remove_interest();
  }
};

// A waiter on a pipe's read end, its reader wired to it.
struct waiting_on_pipe {
  asio::io_context io;
  pipe_pair pipe;
  reader r{&pipe};
  fd_waiter waiter{io.get_executor(), pipe.fds[0], callback{&reader::on_readable, &r}};
  waiting_on_pipe() { r.waiter = &waiter; }
};

} // namespace

BOOST_AUTO_TEST_CASE(handler_block_allocator_serves_its_block_once_at_a_time) {
  handler_block<64> block;
  handler_block_allocator<long, 64> alloc(&block);
  long* first = alloc.allocate(2);
  BOOST_TEST(reinterpret_cast<std::byte*>(first) == block.bytes);
  BOOST_TEST(block.in_use);
  long* second = alloc.allocate(2); // the block is taken: the heap
  BOOST_TEST(reinterpret_cast<std::byte*>(second) != block.bytes);
  alloc.deallocate(second, 2);
  BOOST_TEST(block.in_use);
  alloc.deallocate(first, 2);
  BOOST_TEST(!block.in_use);
  long* too_big = alloc.allocate(9); // 72 bytes > 64: the heap
  BOOST_TEST(reinterpret_cast<std::byte*>(too_big) != block.bytes);
  BOOST_TEST(!block.in_use);
  alloc.deallocate(too_big, 9);
  // Rebound copies share the block (Asio rebinds to its operation type).
  handler_block_allocator<char, 64> rebound(alloc);
  BOOST_TEST((rebound == alloc));
  char* again = rebound.allocate(64);
  BOOST_TEST(reinterpret_cast<std::byte*>(again) == block.bytes);
  rebound.deallocate(again, 64);
}

// The last reference to a block's owner, held by a handler destroyed without being called:
// parked while the block is taken (the handler's memory is freed after its destructor),
// released at once when it is not (a handler kept elsewhere: nothing would free it later).
BOOST_AUTO_TEST_CASE(a_handlers_last_reference_is_parked_only_while_its_block_is_taken) {
  handler_block<64> block;
  handler_block_allocator<long, 64> alloc(&block);
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  long* memory = alloc.allocate(2);
  release_after_free(&block, owner);
  BOOST_TEST(!owner);
  BOOST_TEST(!watch.expired()); // parked in the block
  alloc.deallocate(memory, 2);
  BOOST_TEST(watch.expired()); // released once the block is free
  owner = std::make_shared<int>(8);
  watch = owner;
  release_after_free(&block, owner); // the block is not taken: nothing to wait for
  BOOST_TEST(!block.owner_after_free);
  BOOST_TEST(owner.use_count() == 1); // left to the handler's own destructor
  owner.reset();
  BOOST_TEST(watch.expired());
}

BOOST_FIXTURE_TEST_CASE(calls_back_while_interest_is_declared_and_leaves_no_work_after,
                        waiting_on_pipe) {
  r.remaining = 100;
  waiter.add_interest();
  pipe.write_byte();
  io.run(); // returns once the reader removed its interest: no wait is left
  BOOST_TEST(r.calls == 100);

  // Readable, but nobody is interested: no call, and run() returns at once.
  pipe.write_byte();
  io.restart();
  io.run();
  BOOST_TEST(r.calls == 100);

  // Interest again: the byte that waited is noticed.
  r.remaining = 1;
  waiter.add_interest();
  io.restart();
  io.run();
  BOOST_TEST(r.calls == 101);
}

BOOST_AUTO_TEST_CASE(a_waiter_destroyed_with_its_wait_pending_is_not_called) {
  asio::io_context io;
  pipe_pair pipe;
  reader r{&pipe};
  {
    fd_waiter waiter(io.get_executor(), pipe.fds[0], {&reader::on_readable, &r});
    r.waiter = &waiter;
    r.remaining = 1;
    waiter.add_interest();
    io.poll(); // the wait is now in the reactor
  }
  pipe.write_byte();
  io.restart();
  io.run(); // the cancelled wait completes, finds the waiter gone
  BOOST_TEST(r.calls == 0);
}

BOOST_AUTO_TEST_CASE(a_pending_wait_outlives_waiter_and_io_context) {
  // The wait's memory is the waiter's block, shared with the wait's handler: the
  // io_context destroys the unfinished wait after the waiter is gone (the sanitizer
  // build would see a use after free).
  pipe_pair pipe;
  reader r{&pipe};
  auto io = std::make_unique<asio::io_context>();
  auto waiter = std::make_unique<fd_waiter>(io->get_executor(), pipe.fds[0],
                                            callback{&reader::on_readable, &r});
  waiter->add_interest();
  io->poll();
  waiter.reset();
  io.reset();
  BOOST_TEST(r.calls == 0);
}

BOOST_FIXTURE_TEST_CASE(stop_ends_waiting_for_good, waiting_on_pipe) {
  r.remaining = 5;
  waiter.add_interest();
  waiter.stop();
  pipe.write_byte();
  io.run();
  BOOST_TEST(r.calls == 0);
}

BOOST_AUTO_TEST_CASE(waits_for_both_directions_on_one_fd) {
  // The raw socket's packet backend waits to read and to write on one socket (the reactor
  // takes an fd once). Withdrawing one direction's interest cancels the descriptor's waits;
  // the other direction's, still wanted, is re-armed and still called.
  asio::io_context io;
  int fds[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
  struct counts {
    fd_waiter* waiter = nullptr;
    int readable = 0;
    int writable = 0;
  } c;
  auto on_readable = [](void* p) { ++static_cast<counts*>(p)->readable; };
  auto on_writable = [](void* p) {
    auto* self = static_cast<counts*>(p);
    ++self->writable;
    self->waiter->remove_interest(fd_waiter::write);
  };
  {
    fd_waiter waiter(io.get_executor(), fds[0], {on_readable, &c}, {on_writable, &c});
    c.waiter = &waiter;
    waiter.add_interest(fd_waiter::read);    // nothing to read yet
    waiter.add_interest(fd_waiter::write);   // writable at once; the callback withdraws it
    waiter.remove_interest(fd_waiter::read); // cancels both waits: the write wait re-arms
    io.run(); // until the write callback withdrew its interest: no wait is left
    BOOST_TEST(c.writable == 1);
    BOOST_TEST(c.readable == 0);
    waiter.add_interest(fd_waiter::read);
    BOOST_REQUIRE(::write(fds[1], "x", 1) == 1);
    io.restart();
    while (c.readable == 0 && io.run_one_for(std::chrono::seconds(5)) > 0) {
    }
    BOOST_TEST(c.readable >= 1);
    waiter.remove_interest(fd_waiter::read);
    io.restart();
    io.run(); // no wait left
    BOOST_TEST(c.writable == 1);
  }
  ::close(fds[0]);
  ::close(fds[1]);
}
