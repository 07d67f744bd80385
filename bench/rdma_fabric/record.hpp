// rdma_fabric: one measurement between two ranks, as it travels from the
// measuring rank to rank 0 (a trivially copyable struct sent as bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace rdma_fabric {

enum class kind : std::int32_t { none = 0, bandwidth = 1, latency = 2 };

struct record {
  kind what = kind::none;
  std::int32_t from = -1; ///< The measuring (client) rank: bandwidth flows from it.
  std::int32_t to = -1;   ///< The serving rank.
  std::int32_t round = 0; ///< Tournament round (0-based); -1 for a retest.
  double gbps = 0;        ///< Bandwidth (both directions added when bidirectional).
  double latency_min_us = 0, latency_median_us = 0, latency_p99_us = 0; ///< One-way.
  std::uint64_t iterations = 0;
  double seconds = 0;
  char error[200] = {}; ///< Why the measurement failed; empty when it did not.

  bool failed() const { return error[0] != '\0'; }
  void set_error(const std::string& text) {
    std::size_t n = std::min(text.size(), sizeof(error) - 1);
    std::memcpy(error, text.data(), n);
    error[n] = '\0';
  }
};
static_assert(std::is_trivially_copyable_v<record>);

} // namespace rdma_fabric
