// rdma_bench --op ud_send: unreliable datagrams (asio_rdma::datagram_socket),
// bandwidth and ping-pong latency, to compare with `ib_send_bw -c UD` and
// `ib_send_lat -c UD`.
//
// The framework server also listens for datagrams on the same port number
// (rdma_cm's UDP port space). A client asks it, in a control datagram, for a
// test socket made with the client's completion mode; the server answers with
// that socket's port. Bandwidth: the client sends datagrams as fast as its
// depth allows and, at the end, asks the test socket how many arrived (UD
// drops what a full receive queue cannot take: the loss is reported, not
// hidden). Latency: the server echoes each datagram; a ping lost on the way
// is sent again after 0.5 s and counted.
//
// Control datagram, 32 bytes, little-endian (data datagrams are zero-filled,
// so they never start with the magic):
//   0  'R' 'B' 'U' 'D'   magic
//   4  u8                version (1)
//   5  u8                kind: 1 start, 2 started, 3 stop, 4 stopped
//   6  u8                mode (options.hpp test_mode)
//   7  u8                completion (options.hpp completion_mode)
//   8  u32               message size
//  12  u32               reserved (0)
//  16  u64               started: the test socket's port; stopped: datagrams received
//  24  u64               reserved (0)
#pragma once

#include "options.hpp"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rdma_bench::datagrams {

struct control {
  static constexpr std::size_t encoded_size = 32;
  enum class kind : std::uint8_t { start = 1, started = 2, stop = 3, stopped = 4 };

  kind type = kind::start;
  test_mode mode = test_mode::bandwidth;
  completion_mode completion = completion_mode::event;
  std::uint32_t size = 0;
  std::uint64_t value = 0;
};

std::array<std::byte, control::encoded_size> encode(const control& c);
/// Nothing for a data datagram or anything malformed (unknown kind or mode).
std::optional<control> decode(std::span<const std::byte> in);

/// Serves datagram tests on `s.host`:`s.port` until stopped. Throws when
/// the socket cannot be bound (e.g. --bind 0.0.0.0: a datagram socket needs
/// an RDMA device's address).
boost::asio::awaitable<void> serve(const settings& s);

/// Runs the client's ud_send tests (every size); returns the exit status.
/// Throws on failure, e.g. a size beyond the path MTU.
boost::asio::awaitable<int> run_client(const settings& s);

} // namespace rdma_bench::datagrams
