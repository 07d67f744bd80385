// Checking relative names from the wire (see file_name.hpp).
#include "file_name.hpp"
#include "protocol.hpp"

namespace asio_rdma::detail {

std::vector<std::string> split_relative_name(std::string_view name, error_code& ec) {
  ec = errc::protocol_error;
  std::vector<std::string> components;
  if (name.empty() || name.size() > file_protocol::max_name_length || name.front() == '/' ||
      name.find('\0') != std::string_view::npos)
    return {};
  std::size_t start = 0;
  for (;;) {
    std::size_t end = name.find('/', start);
    std::string_view part =
        name.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty() || part == "." || part == ".." || part.size() > max_name_component)
      return {};
    components.emplace_back(part);
    if (end == std::string_view::npos)
      break;
    start = end + 1;
  }
  ec = {};
  return components;
}

} // namespace asio_rdma::detail
