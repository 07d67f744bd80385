// What the RPC tests share: the transport under test (TCP on the host, RDMA in the VM:
// one source, compiled for each), a server listening on it, and request bytes.
#pragma once

#include "rdma_test.hpp"

#include <asio_rdma/rpc.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace asio_rdma::test {

namespace rpc = asio_rdma::rpc;

/// "tcp://127.0.0.1" or "rdma://<device address>".
inline std::string rpc_base_url() {
#ifdef RPC_TEST_RDMA
  return "rdma://" + device_address();
#else
  return "tcp://127.0.0.1";
#endif
}

/// Makes `s` listen on the transport under test; returns its url.
inline std::string listen_here(rpc::server& s) {
  return rpc_base_url() + ":" + std::to_string(s.listen(rpc_base_url() + ":0"));
}

inline std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

inline std::vector<std::byte> patterned(std::uint64_t seq, std::size_t size) {
  std::vector<std::byte> v(size);
  for (std::size_t i = 0; i < size; ++i)
    v[i] = pattern(seq, i);
  return v;
}

/// The echo method: returns its request.
inline asio::awaitable<std::vector<std::byte>> echo(std::span<const std::byte> request,
                                                   rpc::call_context&) {
  co_return std::vector<std::byte>(request.begin(), request.end());
}

/// A method that waits until cancelled (setting *seen when it sees that), then throws
/// the cancellation on.
inline rpc::method_handler wait_for_cancel(bool* seen) {
  return [seen](std::span<const std::byte>, rpc::call_context& ctx)
             -> asio::awaitable<std::vector<std::byte>> {
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(60));
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    *seen = ec == asio::error::operation_aborted && ctx.cancelled();
    throw boost::system::system_error(ec);
  };
}

/// Waits (up to 2 s) until `s` holds no call: the caller then asserts it does not.
inline asio::awaitable<void> until_no_calls(rpc::server& s) {
  for (int i = 0; i < 2000 && s.calls_in_flight() != 0; ++i)
    co_await sleep_for(std::chrono::milliseconds(1));
}

/// A raw byte stream to `url` on the transport under test, for a peer that breaks the
/// protocol on purpose.
struct raw_peer {
#ifdef RPC_TEST_RDMA
  asio_rdma::stream s;
#else
  asio::ip::tcp::socket s;
#endif
  static asio::awaitable<raw_peer> connect(const std::string& url) {
    auto ep = rpc::endpoint::parse(url).value();
    auto ex = co_await asio::this_coro::executor;
#ifdef RPC_TEST_RDMA
    // Not `raw_peer{co_await ...}`: GCC 12 destroys a temporary of a co_await inside a
    // braced initializer twice (here: the stream's reference to its state, released once
    // too often).
    auto s = co_await async_connect_stream(ex, ep.host, ep.port, asio::use_awaitable);
    co_return raw_peer{std::move(s)};
#else
    asio::ip::tcp::socket sock(ex);
    co_await sock.async_connect({asio::ip::make_address(ep.host), ep.port}, asio::use_awaitable);
    co_return raw_peer{std::move(sock)};
#endif
  }
};

} // namespace asio_rdma::test
