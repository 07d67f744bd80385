// rdma_bench: what the run's device is (asio_rdma::query_device), for the
// header and the JSON file.
#pragma once

#include <string>

namespace rdma_bench {

/// One line describing device `name` and its first port: state, link layer,
/// MTU, rate, firmware and the main limits. A device that cannot be queried
/// yields "NAME (not queried: REASON)".
std::string describe_device(const std::string& name);

} // namespace rdma_bench
