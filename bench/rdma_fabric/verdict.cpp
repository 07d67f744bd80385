#include "verdict.hpp"

#include <algorithm>
#include <cstdio>

namespace rdma_fabric {

references reference_values(const std::vector<record>& records) {
  references refs;
  for (const auto& r : records) {
    if (r.round < 0 || r.failed())
      continue;
    if (r.what == kind::bandwidth)
      refs.best_gbps = std::max(refs.best_gbps, r.gbps);
    else if (r.what == kind::latency && r.latency_median_us > 0)
      refs.lowest_latency_us = refs.lowest_latency_us == 0
                                   ? r.latency_median_us
                                   : std::min(refs.lowest_latency_us, r.latency_median_us);
  }
  return refs;
}

namespace {

template <typename... Values> std::string format(const char* pattern, Values... values) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

} // namespace

std::optional<std::string> suspect(const record& r, const references& refs,
                                   const thresholds& limits) {
  if (r.failed())
    return std::string("failed: ") + r.error;
  if (r.what == kind::bandwidth) {
    if (r.gbps < limits.bandwidth_fraction * refs.best_gbps)
      return format("%.3g Gb/s < %.2g x best %.3g Gb/s", r.gbps, limits.bandwidth_fraction,
                    refs.best_gbps);
    if (limits.min_gbps > 0 && r.gbps < limits.min_gbps)
      return format("%.3g Gb/s < minimum %.3g Gb/s", r.gbps, limits.min_gbps);
  } else if (r.what == kind::latency) {
    if (refs.lowest_latency_us > 0 &&
        r.latency_median_us > limits.latency_multiple * refs.lowest_latency_us)
      return format("%.4g us > %.2g x lowest %.4g us", r.latency_median_us, limits.latency_multiple,
                    refs.lowest_latency_us);
    if (limits.max_latency_us > 0 && r.latency_median_us > limits.max_latency_us)
      return format("%.4g us > maximum %.4g us", r.latency_median_us, limits.max_latency_us);
  }
  return std::nullopt;
}

std::string flag::status() const {
  if (!retest)
    return "not retested";
  return retest_reason ? "confirmed" : "transient";
}

std::vector<flag> judge(const std::vector<record>& records, const thresholds& limits) {
  const auto refs = reference_values(records);
  std::vector<flag> flags;
  for (const auto& r : records) {
    if (r.round < 0 || r.what == kind::none)
      continue;
    auto reason = suspect(r, refs, limits);
    if (!reason)
      continue;
    flag f{r, *reason, std::nullopt, std::nullopt};
    for (const auto& again : records)
      if (again.round < 0 && again.what == r.what && again.from == r.from && again.to == r.to) {
        f.retest = again;
        f.retest_reason = suspect(again, refs, limits);
      }
    flags.push_back(std::move(f));
  }
  return flags;
}

} // namespace rdma_fabric
