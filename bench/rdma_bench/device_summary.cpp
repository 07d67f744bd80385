#include "device_summary.hpp"

#include <asio_rdma/device_info.hpp>

#include <sstream>

namespace rdma_bench {

std::string describe_device(const std::string& name) {
  asio_rdma::error_code ec;
  const auto info = asio_rdma::query_device(name, ec);
  if (ec)
    return name + " (not queried: " + ec.message() + ")";
  std::ostringstream os;
  os << info.name;
  if (!info.ports.empty()) {
    const auto& p = info.ports.front();
    os << " port " << int(p.number) << " " << asio_rdma::to_string(p.state) << " "
       << asio_rdma::to_string(p.layer) << " mtu " << p.active_mtu << " " << p.lanes << "x"
       << p.lane_gbps << "Gb/s";
  }
  const auto& l = info.limits;
  os << " fw " << info.firmware_version << " max_qp " << l.max_qp << " max_qp_wr " << l.max_qp_wr
     << " max_sge " << l.max_sge << " max_cqe " << l.max_cqe << " max_qp_rd_atom "
     << l.max_qp_rd_atom;
  return os.str();
}

} // namespace rdma_bench
