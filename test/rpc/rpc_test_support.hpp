// What the RPC tests share: the transport under test (TCP on the host, RDMA in the VM:
// one program, told which by an argument), a server listening on it, and request bytes.
#pragma once

#include "rdma_test.hpp"

#include <asio_rdma/rpc.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace asio_rdma::test {

namespace rpc = asio_rdma::rpc;

/// Whether this run's transport is RDMA: the test program's argument `--rdma` (after
/// Boost.Test's own, past a `--`), which the integration_* CTest entries give; TCP
/// otherwise. One program runs on both, so each test source is compiled once.
inline bool over_rdma() {
  static const bool rdma = [] {
    const auto& suite = boost::unit_test::framework::master_test_suite();
    for (int i = 1; i < suite.argc; ++i)
      if (std::string_view(suite.argv[i]) == "--rdma")
        return true;
    return false;
  }();
  return rdma;
}

/// "tcp://127.0.0.1" or "rdma://<device address>".
inline std::string rpc_base_url() {
  return over_rdma() ? "rdma://" + device_address() : std::string("tcp://127.0.0.1");
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
  return [seen](std::span<const std::byte>,
                rpc::call_context& ctx) -> asio::awaitable<std::vector<std::byte>> {
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

/// A raw byte stream to `url` on the transport under test (an AsyncReadStream and
/// AsyncWriteStream), for a peer that breaks the protocol on purpose.
class raw_peer {
public:
  using executor_type = asio::any_io_executor;

  static asio::awaitable<raw_peer> connect(const std::string& url) {
    auto ep = rpc::endpoint::parse(url).value();
    auto ex = co_await asio::this_coro::executor;
    raw_peer p;
    if (over_rdma()) {
      // Not `emplace(co_await ...)`: GCC 12 destroys some temporaries of a co_await
      // twice (here it released the stream's reference to its state once too often).
      auto s = co_await async_connect_stream(ex, ep.host, ep.port, asio::use_awaitable);
      p.rdma_.emplace(std::move(s));
    } else {
      p.tcp_.emplace(ex);
      co_await p.tcp_->async_connect({asio::ip::make_address(ep.host), ep.port},
                                     asio::use_awaitable);
    }
    co_return p;
  }

  executor_type get_executor() {
    return with_stream([](auto& s) -> executor_type { return s.get_executor(); });
  }

  // (`this->`: clang 16 takes a member call from a generic lambda for no use of `this`.)
  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          this->with_stream([&](auto& s) { s.async_read_some(b, std::move(handler)); });
        },
        token, buffers);
  }

  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const Buffers& b) {
          this->with_stream([&](auto& s) { s.async_write_some(b, std::move(handler)); });
        },
        token, buffers);
  }

  void close() {
    with_stream([](auto& s) { s.close(); });
  }

  /// The RDMA stream (over_rdma() only).
  asio_rdma::stream& rdma() { return *rdma_; }

  /// A client on this connection, which it takes.
  rpc::client into_client() && {
    return with_stream([](auto& s) { return rpc::client(std::move(s)); });
  }

private:
  /// `f(stream)` on the one stream this peer has.
  template <class F> std::invoke_result_t<F&, asio_rdma::stream&> with_stream(F&& f) {
    return rdma_ ? f(*rdma_) : f(*tcp_);
  }

  std::optional<asio_rdma::stream> rdma_;
  std::optional<asio::ip::tcp::socket> tcp_;
};

} // namespace asio_rdma::test
