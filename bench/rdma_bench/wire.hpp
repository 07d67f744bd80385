// rdma_bench: the test parameters a client sends in its connect private data
// (at most 56 bytes), and the buffer descriptions the peers exchange.
//
// Layout, version 2, little-endian, 20 bytes:
//   0  'R' 'B'     magic
//   2  u8          version (2; version 1's framework server advertised its region
//                  first, which iWARP does not allow: now the client does)
//   3  u8          operation (options.hpp)
//   4  u8          mode
//   5  u8          flags (1: bidirectional, 2: wait for completion events, 4: adaptive
//                  completion, 8: the framework server posts its latency answers and
//                  awaits only the next request, --lat-send post; 16: both ends' copied
//                  sends complete on acknowledgement, --send-completion ack; 32: both
//                  ends send from plain memory, which the library copies, --send-from
//                  copied; 64: the raw-verbs send ping-pong awaited through Asio at both
//                  ends, --asio-floor)
//   6  u16         depth (operations in flight)
//   8  u32         message size
//  12  u32         inline threshold
//  16  u32         adaptive completion's spin in µs (--adaptive-spin; 0: the library's
//                  default; was reserved, 0, so older clients ask for the default)
// Raw-verbs clients append their buffer (address u64, rkey u32, length u64)
// at offset 20, 20 bytes, for write latency.
#pragma once

#include "options.hpp"

#include <asio_rdma/completion_mode.hpp>
#include <asio_rdma/connection_options.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace rdma_bench {

struct test_parameters {
  static constexpr std::uint8_t current_version = 2;
  static constexpr std::size_t encoded_size = 20;
  /// The longest adaptive spin a server accepts (as --adaptive-spin): a client cannot
  /// keep its CPU busy for longer after each completion.
  static constexpr std::uint32_t max_adaptive_spin_us = 1000000;

  operation op = operation::send;
  test_mode mode = test_mode::bandwidth;
  bool bidirectional = false;
  bool event_completion = false;    // the server waits on its completion channel
  bool adaptive_completion = false; // framework server: completion_mode::adaptive
  bool post_answers = false;        // framework server: latency answers not awaited
  bool acknowledged_sends = false;  // framework: send_completion::at_acknowledgement
  bool copied_sends = false;        // framework send: asio::buffer, not registered memory
  bool asio_floor = false;          // raw verbs: each step awaited through Asio (asio_floor.hpp)
  std::uint16_t depth = 1;
  std::uint32_t size = 0;
  std::uint32_t inline_size = 0;
  std::uint32_t adaptive_spin_us = 0; // adaptive completion's spin; 0: the library's default
};

/// How the server's end of a test completes: the way the client asked (a latency test
/// needs both ends to answer as fast as they can).
inline asio_rdma::completion_mode completion_of(const test_parameters& t) {
  return t.event_completion      ? asio_rdma::completion_mode::event
         : t.adaptive_completion ? asio_rdma::completion_mode::adaptive
                                 : asio_rdma::completion_mode::busy_poll;
}

/// The completion mode and, for adaptive completion, its spin, as the client asked (both
/// ends of a test wait alike).
inline void apply_completion(const test_parameters& t, asio_rdma::connection_options& o) {
  o.completion_mode = completion_of(t);
  if (t.adaptive_spin_us != 0)
    o.adaptive_spin = std::chrono::microseconds(t.adaptive_spin_us);
}

/// A peer's memory, as raw verbs see it.
struct buffer_description {
  static constexpr std::size_t encoded_size = 20;
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint64_t length = 0;
};

namespace wire {

inline void put(std::byte* p, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<std::byte>(value >> (8 * i));
}

/// The bits of byte 5; a decoder ignores the others (a later client's).
namespace flag {
constexpr std::uint8_t bidirectional = 1, event_completion = 2, adaptive_completion = 4,
                       post_answers = 8, acknowledged_sends = 16, copied_sends = 32,
                       asio_floor = 64;
constexpr std::uint8_t known = bidirectional | event_completion | adaptive_completion |
                               post_answers | acknowledged_sends | copied_sends | asio_floor;
} // namespace flag

inline std::uint64_t get(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= std::uint64_t(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return value;
}

} // namespace wire

inline std::array<std::byte, test_parameters::encoded_size> encode(const test_parameters& t) {
  std::array<std::byte, test_parameters::encoded_size> out{};
  out[0] = std::byte{'R'};
  out[1] = std::byte{'B'};
  out[2] = std::byte{test_parameters::current_version};
  out[3] = static_cast<std::byte>(t.op);
  out[4] = static_cast<std::byte>(t.mode);
  out[5] = static_cast<std::byte>((t.bidirectional ? wire::flag::bidirectional : 0) |
                                  (t.event_completion ? wire::flag::event_completion : 0) |
                                  (t.adaptive_completion ? wire::flag::adaptive_completion : 0) |
                                  (t.post_answers ? wire::flag::post_answers : 0) |
                                  (t.acknowledged_sends ? wire::flag::acknowledged_sends : 0) |
                                  (t.copied_sends ? wire::flag::copied_sends : 0) |
                                  (t.asio_floor ? wire::flag::asio_floor : 0));
  wire::put(&out[6], t.depth, 2);
  wire::put(&out[8], t.size, 4);
  wire::put(&out[12], t.inline_size, 4);
  wire::put(&out[16], t.adaptive_spin_us, 4);
  return out;
}

/// Decodes and checks what a client sent; on failure `problem` says why
/// (the server sends it back with its rejection).
inline std::optional<test_parameters> decode(std::span<const std::byte> in, std::string& problem) {
  if (in.size() < test_parameters::encoded_size || in[0] != std::byte{'R'} ||
      in[1] != std::byte{'B'}) {
    problem = "not an rdma_bench client (no parameters in the private data)";
    return std::nullopt;
  }
  if (in[2] != std::byte{test_parameters::current_version}) {
    problem = "parameter version " + std::to_string(wire::get(&in[2], 1)) +
              " is not supported (this server speaks version " +
              std::to_string(test_parameters::current_version) + ")";
    return std::nullopt;
  }
  test_parameters t;
  auto op = wire::get(&in[3], 1);
  auto mode = wire::get(&in[4], 1);
  const bool connection_op = (op >= 1 && op <= 6) || op == 8 || op == 9; // 7: datagrams
  if (!connection_op || mode < 1 || mode > 2) {
    problem = "unknown operation or mode";
    return std::nullopt;
  }
  t.op = static_cast<operation>(op);
  t.mode = static_cast<test_mode>(mode);
  const auto flags = wire::get(&in[5], 1);
  t.bidirectional = (flags & wire::flag::bidirectional) != 0;
  t.event_completion = (flags & wire::flag::event_completion) != 0;
  t.adaptive_completion = (flags & wire::flag::adaptive_completion) != 0;
  t.post_answers = (flags & wire::flag::post_answers) != 0;
  t.acknowledged_sends = (flags & wire::flag::acknowledged_sends) != 0;
  t.copied_sends = (flags & wire::flag::copied_sends) != 0;
  t.asio_floor = (flags & wire::flag::asio_floor) != 0;
  t.depth = static_cast<std::uint16_t>(wire::get(&in[6], 2));
  t.size = static_cast<std::uint32_t>(wire::get(&in[8], 4));
  t.inline_size = static_cast<std::uint32_t>(wire::get(&in[12], 4));
  t.adaptive_spin_us = static_cast<std::uint32_t>(wire::get(&in[16], 4));
  if (t.depth == 0 || t.size == 0 || t.size > (1u << 30)) {
    problem = "depth or size out of range";
    return std::nullopt;
  }
  if (t.adaptive_spin_us > test_parameters::max_adaptive_spin_us) {
    problem = "adaptive spin out of range (at most 1 s)";
    return std::nullopt;
  }
  return t;
}

inline void encode(const buffer_description& b, std::byte* out) {
  wire::put(out, b.address, 8);
  wire::put(out + 8, b.rkey, 4);
  wire::put(out + 12, b.length, 8);
}

inline buffer_description decode_buffer(const std::byte* in) {
  return {wire::get(in, 8), static_cast<std::uint32_t>(wire::get(in + 8, 4)),
          wire::get(in + 12, 8)};
}

} // namespace rdma_bench
