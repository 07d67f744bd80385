#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace rdma_fabric {

namespace {

using matrix = std::vector<std::vector<double>>;

matrix fill(const fabric_report& r, kind what) {
  const std::size_t n = r.ranks.size();
  matrix m(n, std::vector<double>(n, -1.0));
  const bool symmetric = what == kind::latency || r.settings.bidirectional;
  for (const auto& x : r.records) {
    if (x.what != what || x.round < 0 || x.from < 0 || x.to < 0 || std::size_t(x.from) >= n ||
        std::size_t(x.to) >= n)
      continue;
    double value = x.failed()                ? std::numeric_limits<double>::quiet_NaN()
                   : what == kind::bandwidth ? x.gbps
                                             : x.latency_median_us;
    m[x.from][x.to] = value;
    if (symmetric)
      m[x.to][x.from] = value;
  }
  return m;
}

void print_matrix(std::ostream& out, const char* title, const matrix& m, const char* format) {
  out << title << "\n      ";
  char cell[32];
  for (std::size_t j = 0; j < m.size(); ++j) {
    std::snprintf(cell, sizeof cell, "%9zu", j);
    out << cell;
  }
  out << "\n";
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::snprintf(cell, sizeof cell, "%6zu", i);
    out << cell;
    for (double v : m[i]) {
      if (std::isnan(v))
        std::snprintf(cell, sizeof cell, "%9s", "FAIL");
      else if (v < 0)
        std::snprintf(cell, sizeof cell, "%9s", "-");
      else
        std::snprintf(cell, sizeof cell, format, v);
      out << cell;
    }
    out << "\n";
  }
}

const char* name(kind k) {
  return k == kind::bandwidth ? "bandwidth" : k == kind::latency ? "latency" : "none";
}

nlohmann::json nullable(double v) {
  return std::isnan(v) || v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
}

nlohmann::json matrix_json(const matrix& m) {
  auto rows = nlohmann::json::array();
  for (const auto& row : m) {
    auto cells = nlohmann::json::array();
    for (double v : row)
      cells.push_back(nullable(v));
    rows.push_back(cells);
  }
  return rows;
}

nlohmann::json record_json(const record& x) {
  nlohmann::json j{{"kind", name(x.what)}, {"from", x.from},        {"to", x.to},
                   {"round", x.round},     {"retest", x.round < 0}, {"iterations", x.iterations},
                   {"seconds", x.seconds}};
  if (x.failed())
    j["error"] = x.error;
  else if (x.what == kind::bandwidth)
    j["gbps"] = x.gbps;
  else
    j["latency_us"] = {
        {"min", x.latency_min_us}, {"median", x.latency_median_us}, {"p99", x.latency_p99_us}};
  return j;
}

} // namespace

matrix bandwidth_matrix(const fabric_report& r) {
  return fill(r, kind::bandwidth);
}
matrix latency_matrix(const fabric_report& r) {
  return fill(r, kind::latency);
}

void print_table(std::ostream& out, const fabric_report& r) {
  const auto& s = r.settings;
  out << "rdma_fabric: " << r.ranks.size() << " ranks; bandwidth: send " << s.size << " B, depth "
      << s.depth << (s.bidirectional ? ", bidirectional" : "") << "; latency: send 8 B ping-pong; "
      << s.duration << " s per test\n";
  for (std::size_t i = 0; i < r.ranks.size(); ++i)
    out << "  rank " << i << ": " << r.ranks[i].host << " " << r.ranks[i].address << ":"
        << r.ranks[i].port << " " << r.ranks[i].device << "\n";
  print_matrix(out,
               s.bidirectional ? "bandwidth Gb/s (both directions of the pair together)"
                               : "bandwidth Gb/s (row sends to column)",
               bandwidth_matrix(r), "%9.3f");
  print_matrix(out, "latency us (median, one way)", latency_matrix(r), "%9.1f");
  const auto refs = reference_values(r.records);
  char line[160];
  std::snprintf(line, sizeof line,
                "thresholds: bandwidth < %.2g x best (%.3f Gb/s), latency > %.2g x lowest "
                "(%.1f us)",
                s.limits.bandwidth_fraction, refs.best_gbps, s.limits.latency_multiple,
                refs.lowest_latency_us);
  out << line;
  if (s.limits.min_gbps > 0)
    out << ", bandwidth < " << s.limits.min_gbps << " Gb/s";
  if (s.limits.max_latency_us > 0)
    out << ", latency > " << s.limits.max_latency_us << " us";
  out << "\n";
  for (const auto& f : r.flags) {
    out << "FLAGGED " << name(f.first.what) << " " << f.first.from
        << (f.first.what == kind::latency || s.bidirectional ? " <-> " : " -> ") << f.first.to
        << ": " << f.reason << "; retest: " << f.status();
    if (f.retest && f.retest_reason)
      out << " (" << *f.retest_reason << ")";
    out << "\n";
  }
  if (r.flags.empty())
    out << "verdict: all pairs within thresholds\n";
  else
    out << "verdict: " << r.flags.size() << " measurement(s) flagged\n";
}

nlohmann::json to_json(const fabric_report& r) {
  const auto& s = r.settings;
  nlohmann::json j;
  j["parameters"] = {{"ranks", r.ranks.size()},
                     {"operation", "send"},
                     {"size", s.size},
                     {"depth", s.depth},
                     {"duration_s", s.duration},
                     {"warmup_s", s.warmup},
                     {"bidirectional", s.bidirectional},
                     {"quick", s.quick},
                     {"retest", s.retest},
                     {"timeout_s", s.timeout},
                     {"bandwidth_fraction", s.limits.bandwidth_fraction},
                     {"latency_multiple", s.limits.latency_multiple},
                     {"min_gbps", s.limits.min_gbps},
                     {"max_latency_us", s.limits.max_latency_us}};
  auto ranks = nlohmann::json::array();
  for (std::size_t i = 0; i < r.ranks.size(); ++i)
    ranks.push_back({{"rank", i},
                     {"host", r.ranks[i].host},
                     {"address", r.ranks[i].address},
                     {"port", r.ranks[i].port},
                     {"device", r.ranks[i].device}});
  j["ranks"] = ranks;
  auto measurements = nlohmann::json::array();
  for (const auto& x : r.records)
    measurements.push_back(record_json(x));
  j["measurements"] = measurements;
  j["bandwidth_gbps"] = matrix_json(bandwidth_matrix(r));
  j["latency_us"] = matrix_json(latency_matrix(r));
  const auto refs = reference_values(r.records);
  j["best_gbps"] = refs.best_gbps;
  j["lowest_latency_us"] = refs.lowest_latency_us;
  auto flags = nlohmann::json::array();
  for (const auto& f : r.flags) {
    nlohmann::json one{{"kind", name(f.first.what)},
                       {"from", f.first.from},
                       {"to", f.first.to},
                       {"reason", f.reason},
                       {"retest", f.status()}};
    if (f.retest)
      one["retest_measurement"] = record_json(*f.retest);
    flags.push_back(one);
  }
  j["flagged"] = flags;
  j["verdict"] = r.flags.empty() ? "pass" : "flagged";
  return j;
}

void write_json(const std::string& path, const fabric_report& r) {
  std::ofstream out(path);
  out << to_json(r).dump(2) << "\n";
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

} // namespace rdma_fabric
