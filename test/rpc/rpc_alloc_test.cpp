// The client's call path allocates nothing in steady state when the reply goes into the
// caller's buffer: counted with a replaced global operator new and aligned_alloc (Asio's
// handler memory; allocation_counter.cpp) on the client's thread, while the server runs on
// a thread of its own. TCP on the host (unit_rpc_alloc), RDMA streams in the VM
// (integration_rpc_alloc: the same program with `-- --rdma`).
#define BOOST_TEST_MODULE rpc_alloc
#include "allocation_counter.hpp"
#include "rpc_test_support.hpp"

#include <optional>
#include <sstream>
#include <thread>
#include <utility>

using namespace asio_rdma::test;
using boost::system::error_code;

namespace {

/// An echo server on its own thread and io_context.
struct server_thread {
  asio::io_context io;
  std::optional<rpc::server> server{io.get_executor()};
  std::string url;
  std::thread runner;

  server_thread() {
    server->add_method("echo", echo);
    url = listen_here(*server);
    runner = std::thread([this] { io.run(); });
  }
  ~server_thread() {
    asio::post(io, [this] { server.reset(); }); // closes its listener and connections
    runner.join();
  }
};

/// Each coroutine's request and reply buffers, made before counting begins.
struct buffers {
  std::vector<std::vector<std::byte>> requests, replies;
  buffers(int in_flight, std::size_t size)
      : requests(in_flight, std::vector<std::byte>(size)),
        replies(in_flight, std::vector<std::byte>(size + 16)) {}
};

/// `n` echo calls from as many coroutines as `b` has buffers, each reply read into the
/// coroutine's own buffer and checked. With `allocations`, the client thread's heap
/// allocations are counted into it in the steady state: from the moment every coroutine
/// has made its first call to the moment the first has no call left to make, so what the
/// coroutines themselves cost to start and end (their frames, Asio's and the test's) is
/// not counted, and every call counted runs beside as many others as there are buffers.
asio::awaitable<void> calls_into_buffers(rpc::client& c, int n, buffers& b,
                                         std::size_t* allocations = nullptr) {
  const int in_flight = static_cast<int>(b.requests.size());
  int next = 0, warm = 0, finished = 0, wrong = 0;
  std::optional<counting_scope> steady;
  auto worker = [&](int w) -> asio::awaitable<void> {
    auto& request = b.requests[w];
    auto& reply = b.replies[w];
    bool first = true;
    while (next < n) {
      const int seq = next++;
      for (std::size_t i = 0; i < request.size(); ++i)
        request[i] = pattern(seq, i);
      auto [ec, length] = co_await c.async_call("echo", asio::buffer(request), asio::buffer(reply),
                                                asio::as_tuple(asio::use_awaitable));
      if (ec || length != request.size() ||
          !std::equal(request.begin(), request.end(), reply.begin()))
        ++wrong;
      if (std::exchange(first, false) && ++warm == in_flight && allocations)
        steady.emplace(counted_threads::this_thread);
    }
    if (steady) {
      *allocations = steady->count();
      steady.reset();
    }
    ++finished;
  };
  for (int w = 0; w < in_flight; ++w)
    asio::co_spawn(co_await asio::this_coro::executor, worker(w), report_failure);
  while (finished < in_flight)
    co_await sleep_for(std::chrono::milliseconds(1));
  BOOST_TEST(wrong == 0);
}

/// Calls per block: 2,000, fewer where ASIO_RDMA_TEST_VOLUME says so (the sanitizer
/// stage; an allocation per call shows in a block of any size).
int block() { return static_cast<int>(scaled(2000, 200)); }

/// The counts of `blocks`, each after a space, for the test's message.
std::string listed(const std::vector<std::size_t>& blocks) {
  std::ostringstream counts;
  for (auto n : blocks)
    counts << " " << n;
  return counts.str();
}

} // namespace

/// Asio's handler memory counts too: its recycling allocator's misses go to aligned_alloc
/// (allocation_counter.hpp).
struct count_asio_memory {
  count_asio_memory() { count_aligned_alloc(true); }
  ~count_asio_memory() { count_aligned_alloc(false); }
};

BOOST_AUTO_TEST_SUITE(rpc_alloc_tests)
BOOST_TEST_GLOBAL_FIXTURE(count_asio_memory);

BOOST_AUTO_TEST_CASE(calls_into_the_callers_buffer_allocate_nothing_on_the_client) {
  server_thread server;
  asio::io_context io;
  run(io, [&]() -> asio::awaitable<void> {
    rpc::client c(io.get_executor(), server.url);
    const int n = block();
    for (int in_flight : {1, 4, 32}) {
      buffers b(in_flight, 64);
      co_await calls_into_buffers(c, n, b); // warm-up: pools and caches fill
      // Steady state: a block of calls that allocates nothing at all, within three
      // blocks. An allocation per call would show in every block; a one-off (in the VM, once
      // in six runs a block counted 2) does not recur.
      std::vector<std::size_t> blocks;
      blocks.reserve(3);
      while (blocks.size() < 3 && (blocks.empty() || blocks.back() != 0)) {
        std::size_t counted = 0;
        co_await calls_into_buffers(c, n, b, &counted);
        blocks.push_back(counted);
      }
      BOOST_TEST_MESSAGE(in_flight << " in flight: heap allocations on the client in blocks of "
                                   << n << " calls:" << listed(blocks));
      BOOST_TEST(blocks.back() == 0u);
    }
  });
}

// Over RDMA a bulk call whose request and exposed reply buffer lie in memory the caller
// registered once (call_options::request_memory, reply_memory) registers nothing per call,
// and allocates nothing either: the server reads the request from that memory and writes
// the reply into it. Over TCP register_memory refuses, the options are ignored, and the
// calls are plain ones into the caller's buffer, which allocate nothing as above.
BOOST_AUTO_TEST_CASE(bulk_calls_from_registered_memory_allocate_nothing_on_the_client) {
  server_thread server;
  asio::io_context io;
  run(io, [&]() -> asio::awaitable<void> {
    rpc::client_options options;
    options.bulk_threshold = 4096; // each call below is a bulk one
    rpc::client c(io.get_executor(), server.url, options);
    co_await c.async_connect(asio::use_awaitable);
    constexpr std::size_t size = 8192;
    std::vector<std::byte> memory(2 * size);
    error_code ec;
    auto region = c.register_memory(memory,
                                    asio_rdma::access::remote_read | asio_rdma::access::local_write |
                                        asio_rdma::access::remote_write,
                                    ec);
    if (over_rdma())
      BOOST_TEST_REQUIRE(!ec, ec.message());
    else
      BOOST_TEST(ec == asio_rdma::errc::operation_not_supported, ec.message());
    rpc::call_options in_region;
    in_region.request_memory = &region;
    in_region.reply_memory = &region;
    in_region.expose_reply_buffer = true;
    const std::span<std::byte> request(memory.data(), size), reply(memory.data() + size, size);
    int wrong = 0;
    const int n = static_cast<int>(scaled(500, 100));
    // Blocks of n calls, each request patterned anew and its echo checked. The first is the
    // warm-up (pools and caches fill); as above, within three counted blocks after it, one
    // that allocates nothing at all.
    std::vector<std::size_t> blocks;
    blocks.reserve(3);
    for (int pass = 0; blocks.size() < 3 && (blocks.empty() || blocks.back() != 0); ++pass) {
      counting_scope scope(counted_threads::this_thread);
      for (int seq = 0; seq < n; ++seq) {
        for (std::size_t i = 0; i < size; ++i)
          request[i] = pattern(seq, i);
        auto [e, length] = co_await c.async_call("echo", asio::buffer(request), asio::buffer(reply),
                                                 in_region, asio::as_tuple(asio::use_awaitable));
        if (e || length != size || !std::equal(request.begin(), request.end(), reply.begin()))
          ++wrong;
      }
      if (pass > 0)
        blocks.push_back(scope.count());
    }
    BOOST_TEST_MESSAGE("heap allocations on the client in blocks of " << n
                       << " bulk calls from registered memory:" << listed(blocks));
    BOOST_TEST(wrong == 0);
    BOOST_TEST(blocks.back() == 0u);
  });
}

BOOST_AUTO_TEST_CASE(calls_with_a_reply_vector_allocate_the_vector) {
  server_thread server;
  asio::io_context io;
  run(io, [&]() -> asio::awaitable<void> {
    rpc::client c(io.get_executor(), server.url);
    const auto request = patterned(1, 64);
    const int n = block();
    for (int i = 0; i < n; ++i) // warm-up, as above
      co_await c.async_call("echo", asio::buffer(request), asio::use_awaitable);
    // As above: within three blocks of calls, one that allocates the replies' vectors
    // and nothing more (the VM's one-off, 2 allocations, once in ten runs, does not recur).
    std::vector<std::size_t> blocks;
    blocks.reserve(3);
    while (blocks.size() < 3 && (blocks.empty() || blocks.back() > std::size_t(n))) {
      counting_scope scope(counted_threads::this_thread);
      for (int i = 0; i < n; ++i) {
        auto reply = co_await c.async_call("echo", asio::buffer(request), asio::use_awaitable);
        BOOST_TEST(reply == request);
      }
      blocks.push_back(scope.count());
    }
    BOOST_TEST_MESSAGE("heap allocations in blocks of " << n << " calls with reply vectors:"
                       << listed(blocks));
    BOOST_TEST(blocks.back() <= std::size_t(n)); // the reply's vector, nothing more
  });
}

BOOST_AUTO_TEST_CASE(a_reply_larger_than_the_buffer_fails_and_the_buffer_is_left_alone) {
  server_thread server;
  asio::io_context io;
  run(io, [&]() -> asio::awaitable<void> {
    rpc::client c(io.get_executor(), server.url);
    const auto request = patterned(2, 1000);
    std::vector<std::byte> small(999, std::byte{0x7e});
    auto [ec, n] = co_await c.async_call("echo", asio::buffer(request), asio::buffer(small),
                                         asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == rpc::errc::response_too_large);
    BOOST_TEST(n == 0u);
    BOOST_TEST(std::all_of(small.begin(), small.end(), [](std::byte b) { return b == std::byte{0x7e}; }));
    // The connection goes on; an error's message lands in the buffer as far as it fits.
    auto [e2, m] = co_await c.async_call("missing", asio::buffer(request), asio::buffer(small),
                                         asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(e2 == rpc::errc::unknown_method);
    BOOST_TEST(rpc::message_of(std::span(small).first(m)) == "unknown method");
    std::vector<std::byte> tiny(4);
    auto [e3, t] = co_await c.async_call("missing", asio::buffer(request), asio::buffer(tiny),
                                         asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(e3 == rpc::errc::unknown_method);
    BOOST_TEST(t == 4u);
    std::vector<std::byte> enough(1000);
    auto [e5, r] = co_await c.async_call("echo", asio::buffer(request), asio::buffer(enough),
                                         asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!e5);
    BOOST_TEST(r == 1000u);
    BOOST_TEST(enough == request);
  });
}

BOOST_AUTO_TEST_SUITE_END()
