// Safe creation of received files (see partial_file.hpp).
#include "partial_file.hpp"
#include "verbs/verbs_error.hpp"

#include "protocol.hpp"

#include <sys/file.h>
#include <vector>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
    temporary_ = std::exchange(other.temporary_, {});
  }
  return *this;
}

namespace {

/// NAME.XXXXXX.part, NAME cut so that the whole fits NAME_MAX (255 bytes).
/// The six characters come from a per-process counter mixed with the time
/// and the pid of the first call (read once: two system calls per file
/// otherwise); uniqueness itself is O_EXCL's job, this only makes a
/// collision (and a retry) rare.
std::string make_temporary_name(const std::string& name, std::uint64_t attempt) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t seed =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      (static_cast<std::uint64_t>(::getpid()) << 32);
  std::uint64_t x = counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ULL;
  x ^= seed;
  x ^= attempt * 0xbf58476d1ce4e5b9ULL;
  static constexpr char alphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
  constexpr std::size_t suffix = 1 + 6 + 5; // ".XXXXXX" ".part"
  std::string t = name.substr(0, 255 - suffix);
  t += '.';
  for (int i = 0; i < 6; ++i, x >>= 6)
    t += alphabet[x & 63];
  t += ".part";
  return t;
}

} // namespace

partial_file partial_file::create(int root, std::span<const std::string> components,
                                  error_code& ec) {
  partial_file f;
  if (components.empty()) {
    ec = errc::protocol_error;
    return f;
  }
  auto directory = open_directories(root, components.first(components.size() - 1), ec);
  if (ec)
    return f;
  return create_in(std::make_shared<const unique_fd>(std::move(directory)), components.back(), ec);
}

partial_file partial_file::create_in(shared_directory directory, const std::string& name,
                                     error_code& ec) {
  ec = {};
  partial_file f;
  f.directory_ = std::move(directory);
  // A temporary of this transfer's own: with O_EXCL, two transfers of one
  // name at once never write into the same file.
  for (std::uint64_t attempt = 0;; ++attempt) {
    std::string temporary = make_temporary_name(name, attempt);
    f.file_ = unique_fd(::openat(f.dir(), temporary.c_str(),
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.file_) {
      f.temporary_ = std::move(temporary);
      break;
    }
    if (errno != EEXIST || attempt == 100) {
      ec = from_errno();
      return f;
    }
  }
  f.name_ = name;
  return f;
}

partial_file partial_file::open_resumable(int root, std::span<const std::string> components,
                                          std::string_view key, std::chrono::seconds max_age,
                                          std::uint64_t& offset, bool& busy, error_code& ec) {
  partial_file f;
  offset = 0;
  busy = false;
  if (components.empty()) {
    ec = errc::protocol_error;
    return f;
  }
  f.directory_ = std::make_shared<const unique_fd>(
      open_directories(root, components.first(components.size() - 1), ec));
  if (ec)
    return f;
  std::string suffix = "." + std::string(key) + ".resume.part";
  std::string temporary = components.back().substr(0, 255 - suffix.size()) + suffix;
  unique_fd fd(
      ::openat(f.dir(), temporary.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    ec = from_errno();
    return f;
  }
  // One transfer at a time per kept file: a second sender of the same file
  // at once gets a temporary of its own instead.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      busy = true;
    else
      ec = from_errno();
    return f;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    ec = from_errno();
    return f;
  }
  if (!S_ISREG(st.st_mode)) {
    ec = error_code(EINVAL, boost::system::system_category());
    return f;
  }
  auto age = std::chrono::system_clock::now() -
             std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
  offset = static_cast<std::uint64_t>(st.st_size);
  if (offset > 0 && age > max_age) { // too old to trust or to keep: start over
    if (::ftruncate(fd.get(), 0) != 0) {
      ec = from_errno();
      return f;
    }
    offset = 0;
  }
  f.file_ = std::move(fd);
  f.temporary_ = std::move(temporary);
  f.name_ = components.back();
  return f;
}

std::size_t partial_file::remove_stale(const std::filesystem::path& directory,
                                       std::chrono::seconds max_age) noexcept {
  namespace fs = std::filesystem;
  std::size_t removed = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  fs::recursive_directory_iterator it(directory, fs::directory_options::skip_permission_denied, ec);
  for (fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    const auto& path = it->path();
    const std::string name = path.filename().string();
    constexpr std::string_view tail = ".resume.part";
    if (name.size() <= tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail))
      continue;
    std::error_code fec;
    if (!it->is_regular_file(fec) || it->is_symlink(fec))
      continue;
    auto changed = it->last_write_time(fec);
    if (!fec && (max_age.count() == 0 || now - changed > max_age) && fs::remove(path, fec))
      ++removed;
  }
  return removed;
}

std::uint32_t partial_file::prefix_crc(std::uint64_t length, error_code& ec) const noexcept {
  ec = {};
  std::vector<std::byte> buffer;
  try {
    buffer.resize(std::size_t(1) << 20);
  } catch (...) {
    ec = error_code(ENOMEM, boost::system::system_category());
    return 0;
  }
  std::uint32_t crc = 0;
  for (std::uint64_t at = 0; at < length;) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - at));
    ssize_t n = ::pread(file_.get(), buffer.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ec = n < 0 ? from_errno() : error_code(EIO, boost::system::system_category());
      return 0;
    }
    crc = file_protocol::crc32c(crc, std::span<const std::byte>(buffer.data(), std::size_t(n)));
    at += static_cast<std::uint64_t>(n);
  }
  return crc;
}

void partial_file::truncate(std::uint64_t length, error_code& ec) noexcept {
  ec = {};
  if (::ftruncate(file_.get(), static_cast<off_t>(length)) != 0)
    ec = from_errno();
}

void partial_file::keep() noexcept {
  file_ = unique_fd();
  name_.clear();
  temporary_.clear();
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

bool partial_file::target_exists() const noexcept {
  struct stat st {};
  return ::fstatat(dir(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

std::uint64_t free_space(int dir, error_code& ec) noexcept {
  ec = {};
  struct statvfs sv {};
  if (::fstatvfs(dir, &sv) != 0) {
    ec = from_errno();
    return 0;
  }
  return static_cast<std::uint64_t>(sv.f_bavail) * sv.f_frsize;
}

namespace {

/// STEM.N.EXT for NAME = STEM.EXT (".bashrc" -> ".bashrc.N"), cut to NAME_MAX.
std::string numbered_name(const std::string& name, unsigned n) {
  std::filesystem::path p(name);
  std::string ext = p.extension().string();
  std::string stem = p.stem().string();
  std::string tail = "." + std::to_string(n) + ext;
  if (tail.size() > 200) { // an absurd extension: number the whole name instead
    tail = "." + std::to_string(n);
    stem = name;
  }
  return stem.substr(0, 255 - tail.size()) + tail;
}

/// Gives the file `from` the new name `to` in `dir` unless `to` exists (errno
/// EEXIST then), by `method`; `from` is gone afterwards. False with errno set
/// on failure; `step` names the call that failed.
bool commit_noreplace(int dir, const std::string& from, const std::string& to, commit_method method,
                      const char*& step) noexcept {
  if (method == commit_method::rename_noreplace) {
    step = "rename to the final name (renameat2 RENAME_NOREPLACE)";
    if (::renameat2(dir, from.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0)
      return true;
    // The probe found rename flags in the receive directory, but a
    // subdirectory may be the mount point of a filesystem without them.
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      return false;
  }
  step = "link to the final name";
  if (::linkat(dir, from.c_str(), dir, to.c_str(), 0) != 0) {
    if (errno != EEXIST)
      return false;
    // NFS: a LINK retransmitted after its reply was lost answers EEXIST
    // although the first one made the link. The temporary is ours alone
    // (O_EXCL, mode 0600), so a second link to it can only be `to`.
    struct stat st {};
    if (::fstatat(dir, from.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_nlink != 2) {
      errno = EEXIST;
      return false;
    }
  }
  // `to` now holds the complete file, whatever unlink says: a failure here
  // leaves a second name of that same file behind, never a damaged one.
  ::unlinkat(dir, from.c_str(), 0);
  return true;
}

} // namespace

commit_method probe_commit_method(int dir, bool durable, const char*& failed_step,
                                  error_code& ec) noexcept {
  ec = {};
  failed_step = "";
  const std::string probe = make_temporary_name(".asio-rdma-probe", 0);
  const std::string target = make_temporary_name(".asio-rdma-probe", 1);
  auto fail = [&](const char* step) {
    ec = from_errno();
    failed_step = step;
    ::unlinkat(dir, probe.c_str(), 0);
    ::unlinkat(dir, target.c_str(), 0);
    return commit_method::rename_noreplace;
  };
  {
    unique_fd file(
        ::openat(dir, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!file)
      return fail("create a file");
    if (::write(file.get(), "x", 1) != 1)
      return fail("write");
    if (durable && ::fsync(file.get()) != 0)
      return fail("fsync a file");
    if (::close(file.release()) != 0)
      return fail("close a file");
  }
  // Network filesystems (NFS, CIFS, 9p, FUSE) refuse rename flags.
  auto method = commit_method::rename_noreplace;
  if (::renameat2(dir, probe.c_str(), dir, target.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      return fail("rename (renameat2 RENAME_NOREPLACE)");
    method = commit_method::link_unlink;
    const char* step = "";
    if (!commit_noreplace(dir, probe, target, method, step))
      return fail(step);
  }
  if (::unlinkat(dir, target.c_str(), 0) != 0)
    return fail("remove a file");
  if (durable && ::fsync(dir) != 0)
    return fail("fsync the directory");
  return method;
}

void partial_file::commit(std::uint32_t mode, bool durable, overwrite_policy policy,
                          commit_method method, std::string& stored_name, error_code& ec,
                          bool sync_directory) noexcept {
  ec = {};
  failed_step_ = "";
  auto fail = [&](error_code e, const char* step) {
    ec = e;
    failed_step_ = step;
    file_ = unique_fd();
    ::unlinkat(dir(), temporary_.c_str(), 0);
    name_.clear();
    temporary_.clear();
  };
  if (::fchmod(file_.get(), mode & 0777) != 0)
    return fail(from_errno(), "fchmod");
  // Durability: the data reaches the disk before the name appears.
  if (durable && ::fsync(file_.get()) != 0)
    return fail(from_errno(), "fsync");
  if (::close(file_.release()) != 0)
    return fail(from_errno(), "close");
  const int dir = this->dir();
  if (policy == overwrite_policy::replace) {
    // rename() replaces NAME atomically: a reader (or a concurrent transfer
    // of the same name) sees the old file or this one, never a mixture.
    if (::renameat(dir, temporary_.c_str(), dir, name_.c_str()) != 0)
      return fail(from_errno(), "rename to the final name");
    stored_name = name_;
  } else {
    // Never replace: the check and the new name are one atomic step (see
    // commit_noreplace), so a concurrent transfer of the same name cannot
    // slip in between.
    for (unsigned n = 0;; ++n) {
      std::string candidate = n == 0 ? name_ : numbered_name(name_, n);
      const char* step = "";
      if (commit_noreplace(dir, temporary_, candidate, method, step)) {
        stored_name = std::move(candidate);
        break;
      }
      if (errno != EEXIST)
        return fail(from_errno(), step);
      if (policy == overwrite_policy::refuse || n == 100000)
        return fail(errc::file_exists, step);
    }
  }
  name_.clear();
  temporary_.clear();
  // ...and the directory entry too, before the name is reported.
  if (durable && sync_directory && ::fsync(dir) != 0) {
    ec = from_errno();
    failed_step_ = "fsync the directory";
  }
}

void partial_file::discard() noexcept {
  if (temporary_.empty())
    return;
  file_ = unique_fd();
  ::unlinkat(dir(), temporary_.c_str(), 0);
  name_.clear();
  temporary_.clear();
}

} // namespace asio_rdma::detail
