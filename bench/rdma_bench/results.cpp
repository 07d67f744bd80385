#include "results.hpp"

#include "device_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace rdma_bench {

double result::quantile(double q) const {
  if (latencies_us.empty())
    return 0;
  auto index = static_cast<std::size_t>(std::ceil(q * latencies_us.size()));
  index = std::clamp<std::size_t>(index, 1, latencies_us.size()) - 1;
  return latencies_us[index];
}

double result::mean() const {
  if (latencies_us.empty())
    return 0;
  return std::accumulate(latencies_us.begin(), latencies_us.end(), 0.0) /
         double(latencies_us.size());
}

void result::finish() {
  std::sort(latencies_us.begin(), latencies_us.end());
}

void print_header(const settings& s, const std::string& device) {
  std::printf("# rdma_bench %s %s %s, device %s, depth %u, connections %u%s, completion %s%s\n",
              std::string(name(s.op)).c_str(), std::string(name(s.mode)).c_str(),
              s.raw_verbs ? "raw-verbs" : "asio_rdma", device.c_str(), s.depth, s.connections,
              s.shared_queues ? " (shared queues)" : "", std::string(name(s.completion)).c_str(),
              s.bidirectional ? ", bidirectional" : "");
  std::printf("# device %s\n", describe_device(device).c_str());
  if (s.mode == test_mode::bandwidth)
    std::printf("%10s %12s %10s %10s\n", "bytes", "iterations", "Gb/s", "Mmsg/s");
  else
    std::printf("%10s %12s %9s %9s %9s %9s %9s\n", "bytes", "iterations", "min_us", "p50_us",
                "p99_us", "p99.9_us", "max_us");
  std::fflush(stdout);
}

void print_row(const settings& s, const result& r) {
  if (s.mode == test_mode::bandwidth)
    std::printf("%10zu %12llu %10.4f %10.5f\n", r.size, (unsigned long long)r.iterations, r.gbps(),
                r.mmsgs());
  else
    std::printf("%10zu %12llu %9.2f %9.2f %9.2f %9.2f %9.2f\n", r.size,
                (unsigned long long)r.iterations, r.quantile(0), r.quantile(0.5), r.quantile(0.99),
                r.quantile(0.999), r.quantile(1));
  std::fflush(stdout);
}

void write_json(const std::string& path, const settings& s, const std::string& device,
                const std::vector<result>& results) {
  using nlohmann::ordered_json;
  ordered_json doc = {
      {"tool", "rdma_bench"},
      {"implementation", s.raw_verbs ? "raw-verbs" : "asio_rdma"},
      {"device", device},
      {"device_info", describe_device(device)},
      {"parameters",
       {{"op", name(s.op)},
        {"mode", name(s.mode)},
        {"host", s.host},
        {"port", s.port},
        {"duration_s", s.duration},
        {"iterations", s.iterations},
        {"warmup_s", s.warmup},
        {"depth", s.depth},
        {"connections", s.connections},
        {"shared_queues", s.shared_queues},
        {"coroutines", s.coroutines},
        {"batch", s.batch},
        {"lat_send", s.lat_post_send ? "post" : "await"},
        {"send_completion", s.acknowledged_sends ? "ack" : "post"},
        {"send_from", s.copied_sends ? "copied" : "registered"},
        {"asio_floor", s.asio_floor},
        {"completion", name(s.completion)},
        {"bidirectional", s.bidirectional},
        {"inline", s.inline_size}}},
      {"results", ordered_json::array()},
  };
  for (const auto& r : results) {
    ordered_json row = {{"bytes", r.size},
                        {"iterations", r.iterations},
                        {"seconds", r.seconds},
                        {"gbps", r.gbps()},
                        {"mmsg_per_s", r.mmsgs()}};
    if (s.op == operation::ud_send) {
      row["datagrams_sent"] = r.datagrams_sent;
      row["datagrams_delivered"] = r.datagrams_delivered;
    }
    if (s.mode == test_mode::latency) {
      row["lat_min_us"] = r.quantile(0);
      row["lat_p50_us"] = r.quantile(0.5);
      row["lat_mean_us"] = r.mean();
      row["lat_p99_us"] = r.quantile(0.99);
      row["lat_p999_us"] = r.quantile(0.999);
      row["lat_max_us"] = r.quantile(1);
    }
    doc["results"].push_back(std::move(row));
  }
  std::ofstream out(path);
  if (!out)
    throw std::runtime_error("cannot write " + path);
  // Bytes that are not UTF-8 (a device or host name) are replaced, not thrown.
  out << doc.dump(2, ' ', false, ordered_json::error_handler_t::replace) << '\n';
  if (!out.flush())
    throw std::runtime_error("cannot write " + path);
}

} // namespace rdma_bench
