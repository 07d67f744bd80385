// The transport timers of a reliable connection: encoding the RNR NAK timer
// and applying the options that rdma_cm leaves at its own defaults.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace asio_rdma::detail {

// The IB RNR NAK timer field (IBTA table 45): code -> delay in units of
// 10 us. Code 0 means 655.36 ms, the largest; 1..31 grow from 10 us.
inline constexpr std::array<std::uint32_t, 32> rnr_timer_delays_10us = {
    65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
    48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
    2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};

/// The smallest RNR timer code whose delay is at least `delay` (code 0,
/// 655.36 ms, for anything above 491.52 ms).
constexpr std::uint8_t rnr_timer_code(std::chrono::microseconds delay) {
  for (std::uint8_t code = 1; code < rnr_timer_delays_10us.size(); ++code)
    if (std::int64_t(rnr_timer_delays_10us[code]) * 10 >= delay.count())
      return code;
  return 0;
}

/// The delay a code stands for.
constexpr std::chrono::microseconds rnr_timer_delay(std::uint8_t code) {
  return std::chrono::microseconds(std::int64_t(rnr_timer_delays_10us[code & 31]) * 10);
}

} // namespace asio_rdma::detail
