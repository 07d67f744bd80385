// Fuzzes the RPC layer's connections with a hostile peer's bytes (lib/rpc): the input is
// what the peer writes, fed to a server's connection (as a client's requests and cancels)
// and to a client's connection (as a server's replies to calls in flight, some of which
// the client cancels), through an in-memory transport. The real read loops, call tables,
// frame writers and handlers run on an io_context. Invariants: nothing reads outside a
// buffer (ASan); every run ends (the input's end closes the connection, which must end
// every call: no hang, the io_context runs out of work); every client call completes
// exactly once; afterwards the server holds no call and no connection.
#include "fuzz_check.hpp"

#include "rpc/client_connection.hpp"
#include "rpc/server_connection.hpp"
#include "rpc/server_impl.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

namespace asio = boost::asio;
namespace rpc = asio_rdma::rpc;
using boost::system::error_code;

namespace {

/// A transport whose reads take the peer's bytes from memory and whose writes vanish;
/// each completion is posted, as a real one is.
class memory_transport final : public rpc::detail::transport {
public:
  memory_transport(asio::io_context& io, const std::uint8_t* data, std::size_t size)
      : io_(io), data_(data), left_(size) {}

  // Writes taken at once in turn whole, in part and not at all: every way a batch of
  // frames is written.
  std::size_t write_now(std::span<const asio::const_buffer> buffers) override {
    if (closed_)
      return 0;
    const std::size_t total = asio::buffer_size(buffers);
    const std::size_t n = std::array{total, total / 2, std::size_t(0)}[writes_++ % 3];
    touch(buffers, 0, n);
    return n;
  }

  void write(std::span<const asio::const_buffer> buffers, std::size_t skip,
             rpc::detail::io_done done) override {
    const std::size_t n = asio::buffer_size(buffers) - skip;
    touch(buffers, skip, n);
    const error_code ec = closed_ ? error_code(asio::error::operation_aborted) : error_code();
    asio::post(io_, [done = std::move(done), ec, n] { done.fn(done.owner.get(), ec, n); });
  }

  void read(asio::mutable_buffer buffer, rpc::detail::io_done done) override {
    const std::size_t n = closed_ ? 0 : std::min(buffer.size(), left_);
    if (n)
      std::memcpy(buffer.data(), data_, n);
    data_ += n;
    left_ -= n;
    error_code ec;
    if (closed_)
      ec = asio::error::operation_aborted;
    else if (n < buffer.size())
      ec = asio::error::eof;
    asio::post(io_, [done = std::move(done), ec, n] { done.fn(done.owner.get(), ec, n); });
  }

  // The peer's bytes come in pieces of odd sizes: headers and payloads split anywhere.
  void read_some(asio::mutable_buffer buffer, rpc::detail::io_done done) override {
    const std::size_t piece = 1 + (left_ + reads_++ * 7) % 61;
    read(asio::buffer(buffer.data(), std::min({buffer.size(), piece, std::max<std::size_t>(left_, 1)})),
         std::move(done));
  }

  void shutdown(rpc::detail::io_done done) override {
    const error_code ec = closed_ ? error_code(asio::error::operation_aborted) : error_code();
    asio::post(io_, [done = std::move(done), ec] { done.fn(done.owner.get(), ec, 0); });
  }

  void close() noexcept override { closed_ = true; }

private:
  // Touches `n` bytes of `buffers` after the first `skip`: ASan checks they are alive.
  static void touch(std::span<const asio::const_buffer> buffers, std::size_t skip, std::size_t n) {
    volatile unsigned char sink = 0;
    for (const auto& b : buffers) {
      for (std::size_t i = 0; i < b.size() && n > 0; ++i) {
        if (skip > 0) {
          --skip;
          continue;
        }
        sink ^= static_cast<const unsigned char*>(b.data())[i];
        --n;
      }
    }
  }

  asio::io_context& io_;
  const std::uint8_t* data_;
  std::size_t left_;
  std::size_t reads_ = 0;
  std::size_t writes_ = 0;
  bool closed_ = false;
};

asio::awaitable<std::vector<std::byte>> echo(std::span<const std::byte> r, rpc::call_context&) {
  co_return std::vector<std::byte>(r.begin(), r.end());
}

asio::awaitable<std::vector<std::byte>> yielding(std::span<const std::byte> r,
                                                 rpc::call_context& ctx) {
  for (int i = 0; i < 4 && !ctx.cancelled(); ++i)
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return std::vector<std::byte>(r.begin(), r.begin() + std::min<std::size_t>(r.size(), 8));
}

asio::awaitable<std::vector<std::byte>> failing(std::span<const std::byte>, rpc::call_context&) {
  throw std::runtime_error("fails");
  co_return std::vector<std::byte>();
}

void fuzz_server(const std::uint8_t* data, std::size_t size) {
  asio::io_context io;
  rpc::server_options o;
  o.max_request_size = 4096;
  o.max_calls_per_connection = 4;
  o.max_calls = 6;
  auto server = std::make_shared<rpc::detail::server_impl>(io.get_executor(), o);
  server->add_method("echo", echo, rpc::method_options());
  server->add_method("yield", yielding, rpc::method_options());
  server->add_method("fail", failing, rpc::method_options());
  server->serve(std::make_unique<memory_transport>(io, data, size));
  io.run();
  FUZZ_CHECK(server->calls() == 0);
  FUZZ_CHECK(server->connections() == 0);
}

struct observer final : rpc::detail::client_connection::observer {
  void connection_up(rpc::detail::client_connection&) override {}
  void connection_failed(rpc::detail::client_connection&, const error_code&) override {}
};

void fuzz_client(const std::uint8_t* data, std::size_t size) {
  asio::io_context io;
  observer watcher;
  rpc::client_options o;
  o.max_response_size = 1024;
  auto conn = std::make_shared<rpc::detail::client_connection>(io.get_executor(), o, &watcher);
  // Calls in flight: the first bytes say how many (1..8) and which to cancel when.
  const int calls = 1 + (size ? data[0] % 8 : 0);
  const std::uint8_t cancel_mask = size > 1 ? data[1] : 0;
  std::vector<asio::cancellation_signal> signals(calls);
  std::vector<int> completions(calls, 0);
  static const std::array<std::byte, 16> request{};
  for (int i = 0; i < calls; ++i)
    conn->call(rpc::method_id("echo"), asio::buffer(request), std::chrono::seconds(60),
               rpc::detail::reply_operation(
                   asio::bind_cancellation_slot(
                       signals[i].slot(),
                       [&completions, i](error_code, std::vector<std::byte> reply) {
                         FUZZ_CHECK(reply.size() <= 64 * 1024);
                         ++completions[i];
                       }),
                   io.get_executor()));
  const std::size_t skip = std::min<std::size_t>(size, 2);
  conn->adopt(std::make_unique<memory_transport>(io, data + skip, size - skip), 4096);
  // Cancellations land between the I/O steps.
  for (int step = 0; io.run_one(); ++step)
    if (step < 8 && (cancel_mask >> step) & 1)
      signals[step % calls].emit(asio::cancellation_type::terminal);
  for (int c : completions)
    FUZZ_CHECK(c == 1);
  FUZZ_CHECK(conn->failed());
  FUZZ_CHECK(conn->calls_in_flight() == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  // The first byte picks the side; the rest is the peer's bytes.
  if (data[0] & 1)
    fuzz_server(data + 1, size - 1);
  else
    fuzz_client(data + 1, size - 1);
  return 0;
}
