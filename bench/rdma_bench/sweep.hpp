// rdma_bench: a client's sweep over the sizes, shared by the connection and
// datagram tests: measure each size, print its row, then write the JSON.
#pragma once

#include "results.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace rdma_bench {

/// `measure(s, size, device)` returns awaitable<result> and names the device
/// it ran on (printed in the header once the first size is measured).
template <class Measure> boost::asio::awaitable<int> run_sweep(const settings& s, Measure measure) {
  std::vector<result> results;
  std::string device;
  bool header = false;
  for (auto size : s.sizes) {
    auto r = co_await measure(s, size, device);
    if (!header) {
      print_header(s, device);
      header = true;
    }
    print_row(s, r);
    results.push_back(std::move(r));
  }
  if (!s.json_path.empty())
    write_json(s.json_path, s, device, results);
  co_return 0;
}

} // namespace rdma_bench
