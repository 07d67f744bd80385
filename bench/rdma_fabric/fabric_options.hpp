// rdma_fabric: what a fabric check measures and how it judges, and the
// command line that sets it.
#pragma once

#include "verdict.hpp"

#include <CLI/App.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rdma_fabric {

struct fabric_settings {
  std::string address;        ///< This rank's listening address; empty: from the device.
  std::string device;         ///< RDMA device to take the address from; empty: the first active.
  std::uint16_t port = 0;     ///< Listening port; 0: a free one.
  std::size_t size = 65536;   ///< Message size of the bandwidth test.
  std::uint32_t depth = 32;   ///< Sends in flight in the bandwidth test.
  double duration = 1.0;      ///< Seconds measured per bandwidth or latency test.
  double warmup = 0.2;        ///< Seconds before measuring starts.
  bool bidirectional = false; ///< Both directions of a pair at once (one test per pair).
  bool quick = false;         ///< Short tests: 0.25 s each, 0.05 s warm-up.
  bool retest = true;         ///< Measure flagged pairs again, alone.
  thresholds limits;
  double timeout = 60; ///< Seconds any rank waits for the others, or past a test's length.
  std::string json_path;
  std::string heatmap_path;
};

/// Declares rdma_fabric's options in `app`; parsing fills `s` (--quick
/// applied) and throws asio_rdma::cli::usage_error for bad combinations.
void describe(CLI::App& app, fabric_settings& s);

} // namespace rdma_fabric
