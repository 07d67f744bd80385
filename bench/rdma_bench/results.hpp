// rdma_bench: the figures of one measured size, the table and the JSON file.
#pragma once

#include "options.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace rdma_bench {

/// What one size of one test measured.
struct result {
  std::size_t size = 0;
  std::uint64_t iterations = 0; // operations completed while measuring
  double seconds = 0;
  /// Latency mode: one-way latencies (half a round trip) in microseconds.
  std::vector<double> latencies_us;
  /// ud_send: datagrams sent over the whole run (warm-up included), and how
  /// many of them the server received (UD may drop some).
  std::uint64_t datagrams_sent = 0;
  std::uint64_t datagrams_delivered = 0;

  double gbps() const { return seconds > 0 ? iterations * double(size) * 8 / seconds / 1e9 : 0; }
  double mmsgs() const { return seconds > 0 ? iterations / seconds / 1e6 : 0; }
  /// The q-quantile (0..1) of latencies_us (sorted by finish()).
  double quantile(double q) const;
  /// The mean of latencies_us: what rstream reports (usec/xfer), for a comparison
  /// with it as it measures.
  double mean() const;
  void finish(); // sorts the latencies
};

/// Prints the table header and one row per result (to stdout).
void print_header(const settings& s, const std::string& device);
void print_row(const settings& s, const result& r);

/// Writes the parameters, the device and every result as JSON; throws
/// std::runtime_error when the file cannot be written.
void write_json(const std::string& path, const settings& s, const std::string& device,
                const std::vector<result>& results);

} // namespace rdma_bench
