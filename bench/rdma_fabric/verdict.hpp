// rdma_fabric: which pairs are suspect. A pair is flagged when its bandwidth
// is below a fraction of the best pair's, its latency above a multiple of the
// lowest, it is outside the optional absolute limits, or its measurement
// failed.
#pragma once

#include "record.hpp"

#include <optional>
#include <string>
#include <vector>

namespace rdma_fabric {

struct thresholds {
  double bandwidth_fraction = 0.5; ///< Flag below this fraction of the best pair's Gb/s.
  double latency_multiple = 3.0;   ///< Flag above this multiple of the lowest median latency.
  double min_gbps = 0;             ///< Flag below this many Gb/s (0: no absolute limit).
  double max_latency_us = 0;       ///< Flag above this median latency (0: no absolute limit).
};

/// The references the relative thresholds are taken from: the best bandwidth
/// and the lowest median latency among the first measurements that succeeded
/// (0 when there are none).
struct references {
  double best_gbps = 0;
  double lowest_latency_us = 0;
};

references reference_values(const std::vector<record>& records);

/// Why `r` is suspect against `refs` and `limits`, or nothing when it is not.
std::optional<std::string> suspect(const record& r, const references& refs,
                                   const thresholds& limits);

struct flag {
  record first; ///< The measurement that was flagged.
  std::string reason;
  std::optional<record> retest;             ///< Its retest, when one ran.
  std::optional<std::string> retest_reason; ///< Why the retest is suspect too.

  /// "confirmed" (retest suspect too), "transient" (retest passed) or
  /// "not retested".
  std::string status() const;
};

/// The flagged first measurements (round >= 0) of `records`, each with its
/// retest (a record of the same kind and pair with round -1), if any.
std::vector<flag> judge(const std::vector<record>& records, const thresholds& limits);

} // namespace rdma_fabric
