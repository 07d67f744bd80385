// What a send operation transfers: the files and directories, in order,
// with their names on the wire; listed before anything is sent so that local
// errors (missing file, unreadable tree) fail the operation up front.
#pragma once

#include <asio_rdma/error.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace asio_rdma::detail {

struct send_entry {
  std::filesystem::path local;
  std::string name; ///< relative, '/'-separated
  bool directory = false;
};

/// One file (`tree` false) or a directory and everything below it.
std::vector<send_entry> list_send_entries(const std::filesystem::path& path, bool tree,
                                          error_code& ec);

} // namespace asio_rdma::detail
