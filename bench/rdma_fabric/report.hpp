// rdma_fabric: what rank 0 reports: the pair matrices and the flagged pairs
// as a table, and everything (parameters, ranks, every measurement, the
// verdict) as JSON, which fabric_heatmap draws.
#pragma once

#include "fabric_options.hpp"
#include "record.hpp"
#include "verdict.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace rdma_fabric {

struct rank_info {
  std::string host;    ///< Host name the rank runs on.
  std::string address; ///< Where it listens.
  std::uint16_t port = 0;
  std::string device; ///< Its RDMA device.
};

struct fabric_report {
  const fabric_settings& settings;
  std::vector<rank_info> ranks;
  std::vector<record> records; ///< First measurements and retests.
  std::vector<flag> flags;
};

/// The bandwidth (Gb/s, row sends to column) and latency (median one-way µs)
/// matrices of the first measurements; -1 where nothing was measured, NaN
/// where the measurement failed.
std::vector<std::vector<double>> bandwidth_matrix(const fabric_report& r);
std::vector<std::vector<double>> latency_matrix(const fabric_report& r);

/// The table: parameters, both matrices, the flagged pairs and the verdict.
void print_table(std::ostream& out, const fabric_report& r);

nlohmann::json to_json(const fabric_report& r);

/// Writes to_json(r) to `path`; throws std::runtime_error when it cannot.
void write_json(const std::string& path, const fabric_report& r);

} // namespace rdma_fabric
