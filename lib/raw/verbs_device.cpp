#include "raw/verbs_device.hpp"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace asio_rdma::detail {
namespace {

std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

} // namespace

ibv_device* find_verbs_device(ibv_device** devices, const std::string& interface_name,
                              std::uint8_t& port) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  for (ibv_device** it = devices; it && *it; ++it) {
    const fs::path device_path((*it)->ibdev_path);
    for (const auto& entry : fs::directory_iterator(device_path / "ports", ignored)) {
      for (const auto& ndev :
           fs::directory_iterator(entry.path() / "gid_attrs" / "ndevs", ignored)) {
        if (read_line(ndev.path()) == interface_name) {
          port = static_cast<std::uint8_t>(std::stoul(entry.path().filename().string()));
          return *it;
        }
      }
    }
    if (fs::exists(device_path / "device" / "net" / interface_name, ignored)) {
      const std::string dev_port =
          read_line(fs::path("/sys/class/net") / interface_name / "dev_port");
      port = static_cast<std::uint8_t>(1 + (dev_port.empty() ? 0 : std::stoul(dev_port)));
      return *it;
    }
  }
  return nullptr;
}

} // namespace asio_rdma::detail
