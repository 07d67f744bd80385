// Safe creation of received files (see partial_file.hpp).
#include "partial_file.hpp"
#include "verbs_error.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace asio_rdma::detail {

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

unique_fd::~unique_fd() {
  if (fd_ >= 0)
    ::close(fd_);
}

unique_fd open_directories(int root, std::span<const std::string> components, error_code& ec) {
  ec = {};
  unique_fd dir(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  if (!dir) {
    ec = from_errno();
    return {};
  }
  for (const auto& c : components) {
    if (::mkdirat(dir.get(), c.c_str(), 0755) != 0 && errno != EEXIST) {
      ec = from_errno();
      return {};
    }
    unique_fd next(::openat(dir.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      ec = from_errno();
      return {};
    }
    dir = std::move(next);
  }
  return dir;
}

partial_file& partial_file::operator=(partial_file&& other) noexcept {
  if (this != &other) {
    discard();
    directory_ = std::move(other.directory_);
    file_ = std::move(other.file_);
    name_ = std::exchange(other.name_, {});
  }
  return *this;
}

partial_file partial_file::create(int root, std::span<const std::string> components,
                                  error_code& ec) {
  partial_file f;
  if (components.empty()) {
    ec = errc::protocol_error;
    return f;
  }
  f.directory_ = open_directories(root, components.first(components.size() - 1), ec);
  if (ec)
    return f;
  std::string part = components.back() + ".part";
  f.file_ = unique_fd(::openat(f.directory_.get(), part.c_str(),
                               O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f.file_) {
    ec = from_errno();
    return f;
  }
  f.name_ = components.back();
  return f;
}

void partial_file::write_at(std::span<const std::byte> data, std::uint64_t offset,
                            error_code& ec) noexcept {
  ec = {};
  while (!data.empty()) {
    ssize_t n = ::pwrite(file_.get(), data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ec = n < 0 ? from_errno() : error_code(EIO, boost::system::system_category());
      return;
    }
    data = data.subspan(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
}

void partial_file::commit(std::uint32_t mode, error_code& ec) noexcept {
  ec = {};
  if (::fchmod(file_.get(), mode & 0777) != 0) {
    ec = from_errno();
    return;
  }
  if (::close(file_.release()) != 0) {
    ec = from_errno();
    std::string part = name_ + ".part";
    ::unlinkat(directory_.get(), part.c_str(), 0);
    name_.clear();
    return;
  }
  std::string part = name_ + ".part";
  if (::renameat(directory_.get(), part.c_str(), directory_.get(), name_.c_str()) != 0) {
    ec = from_errno();
    ::unlinkat(directory_.get(), part.c_str(), 0);
  }
  name_.clear();
}

void partial_file::discard() noexcept {
  if (name_.empty())
    return;
  file_ = unique_fd();
  std::string part = name_ + ".part";
  ::unlinkat(directory_.get(), part.c_str(), 0);
  name_.clear();
}

} // namespace asio_rdma::detail
