// Shared helpers of the raw socket's netns tests: two sockets on a veth pair, a coroutine
// runner with a hang guard, sending and collecting frames. Test-only.
#pragma once

#include "frames.hpp"
#include "netns_fixture.hpp"

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <exception>

namespace raw_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// Runs `coroutine` on `io` to completion; fails the test when it throws or takes longer
/// than `limit` (a hang must not stall the suite).
template <typename Awaitable>
void run_coroutine(asio::io_context& io, Awaitable coroutine, std::chrono::seconds limit = 20s) {
  bool done = false;
  std::exception_ptr error;
  io.restart(); // a previous run may have run out of work
  asio::co_spawn(io, std::move(coroutine), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  io.run_for(limit);
  BOOST_REQUIRE_MESSAGE(done, "the test coroutine did not finish within the time limit");
  if (error)
    std::rethrow_exception(error);
}

/// Two raw sockets: `a` on the veth end in ns_a, `b` on the one in ns_b.
struct socket_pair {
  explicit socket_pair(asio_rdma::raw_socket_options options = {}) {
    {
      scoped_netns in(net.ns_a);
      a = asio_rdma::raw_socket::open(io.get_executor(), net.if_a, options);
    }
    {
      scoped_netns in(net.ns_b);
      b = asio_rdma::raw_socket::open(io.get_executor(), net.if_b, options);
    }
  }
  asio_rdma::mac_address mac_a() const { return asio_rdma::parse_mac_address(net.mac_a); }
  asio_rdma::mac_address mac_b() const { return asio_rdma::parse_mac_address(net.mac_b); }

  netns_pair net;
  asio::io_context io;
  asio_rdma::raw_socket a, b;
};

/// Sends every frame through `socket` (acquire, fill, send), then flushes.
inline asio::awaitable<void> send_frames(asio_rdma::raw_socket& socket,
                                         std::vector<std::vector<std::uint8_t>> frames) {
  std::size_t next = 0;
  while (next < frames.size()) {
    auto batch = co_await socket.async_acquire(frames.size() - next, asio::use_awaitable);
    for (auto& packet : batch) {
      const auto& frame = frames[next++];
      std::memcpy(packet.buffer().data(), frame.data(), frame.size());
      packet.length = frame.size();
    }
    co_await socket.async_send(std::move(batch), asio::use_awaitable);
  }
  co_await socket.async_flush(asio::use_awaitable);
}

struct received_frame {
  std::vector<std::uint8_t> data;
  std::optional<std::uint16_t> vlan_tci;
};

/// Receives until nothing arrives for `quiet`; returns copies of the frames.
inline asio::awaitable<std::vector<received_frame>>
receive_until_quiet(asio_rdma::raw_socket& socket, std::chrono::milliseconds quiet = 300ms) {
  std::vector<received_frame> frames;
  for (;;) {
    auto [ec, batch] =
        co_await socket.async_receive(64, quiet, asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::timed_out)
      co_return frames;
    if (ec)
      throw boost::system::system_error(ec, "async_receive");
    BOOST_REQUIRE(!batch.empty()); // never an empty batch on success
    for (const auto& packet : batch) {
      auto* bytes = reinterpret_cast<const std::uint8_t*>(packet.data.data());
      frames.push_back({{bytes, bytes + packet.data.size()}, packet.vlan_tci});
    }
  }
}

/// A UDP frame from b to a with the given destination port and sequence number.
inline frame_spec udp_to_a(const socket_pair& s, std::uint16_t port, std::uint32_t sequence = 0) {
  frame_spec spec;
  spec.destination = s.mac_a();
  spec.source = s.mac_b();
  spec.destination_port = port;
  spec.sequence = sequence;
  return spec;
}

/// The frames of `specs`, built (a function: GCC 12 mishandles braced lists in co_await).
template <typename... Specs>
std::vector<std::vector<std::uint8_t>> frame_list(const Specs&... specs) {
  std::vector<std::vector<std::uint8_t>> frames;
  (frames.push_back(build_frame(specs)), ...);
  return frames;
}

/// The sequence number build_frame wrote into an untagged UDP frame.
inline std::uint32_t sequence_of(const std::vector<std::uint8_t>& f) {
  const std::size_t at = 14 + 20 + 8;
  return std::uint32_t{get16(&f[at])} << 16 | get16(&f[at + 2]);
}

/// The sequence number of a received untagged UDP frame.
inline std::uint32_t sequence_of(const asio_rdma::received_packet& packet) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(packet.data.data());
  return sequence_of(std::vector<std::uint8_t>(bytes, bytes + packet.data.size()));
}

} // namespace raw_test
