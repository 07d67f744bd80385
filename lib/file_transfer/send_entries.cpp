// Listing what a send operation transfers (see send_entries.hpp).
#include "send_entries.hpp"

#include "file_name.hpp"

#include <boost/asio/error.hpp>

namespace asio_rdma::detail {

namespace fs = std::filesystem;

namespace {

/// The last component of `path` ("dir/" and "dir/." give "dir").
std::string last_name(const fs::path& path, error_code& ec) {
  std::error_code sec;
  fs::path p = fs::absolute(path, sec).lexically_normal();
  if (sec) {
    ec = error_code(sec.value(), boost::system::system_category());
    return {};
  }
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path())
    p = p.parent_path();
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..")
    ec = boost::asio::error::invalid_argument;
  return name;
}

bool name_ok(const std::string& name, error_code& ec) {
  error_code check;
  split_relative_name(name, check);
  if (check)
    ec = error_code(ENAMETOOLONG, boost::system::system_category());
  return !check;
}

} // namespace

std::vector<send_entry> list_send_entries(const fs::path& path, bool tree, error_code& ec) {
  ec = {};
  std::vector<send_entry> entries;
  std::error_code sec;
  auto status = fs::status(path, sec);
  if (sec) {
    ec = error_code(sec.value(), boost::system::system_category());
    return {};
  }
  std::string root = last_name(path, ec);
  if (ec)
    return {};
  if (!tree) {
    if (fs::is_directory(status))
      ec = error_code(EISDIR, boost::system::system_category());
    else if (!fs::is_regular_file(status))
      ec = boost::asio::error::invalid_argument;
    else if (name_ok(root, ec))
      entries.push_back({path, root, false});
    return ec ? std::vector<send_entry>() : entries;
  }
  if (!fs::is_directory(status)) {
    ec = error_code(ENOTDIR, boost::system::system_category());
    return {};
  }
  if (!name_ok(root, ec))
    return {};
  entries.push_back({path, root, true});
  fs::recursive_directory_iterator it(path, fs::directory_options::none, sec), end;
  for (; !sec && it != end; it.increment(sec)) {
    // The entry's type as the directory listing gave it (no stat per entry
    // where the filesystem fills in d_type); links are not followed.
    bool link = it->is_symlink(sec);
    bool dir = !sec && !link && it->is_directory(sec);
    bool regular = !sec && !link && !dir && it->is_regular_file(sec);
    if (sec)
      break;
    if (!dir && !regular)
      continue; // links, devices, sockets, fifos are not sent
    std::string name = root + "/" + it->path().lexically_relative(path).generic_string();
    if (!name_ok(name, ec))
      return {};
    entries.push_back({it->path(), std::move(name), dir});
  }
  if (sec) {
    ec = error_code(sec.value(), boost::system::system_category());
    return {};
  }
  return entries;
}

} // namespace asio_rdma::detail
