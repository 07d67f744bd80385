// Creating received files safely below a directory: every component is
// opened relative to its parent with O_NOFOLLOW, the data goes to a temporary
// NAME.XXXXXX.part of its own (created with O_EXCL, so two transfers of one
// name never share it), which is renamed to NAME only once complete (rename
// is atomic: NAME is always one complete file) and removed otherwise. A
// resumable transfer writes to NAME.<key>.resume.part instead, locked while
// in use, and keeps it when interrupted (see file_transfer_options::resume).
#pragma once

#include <asio_rdma/error.hpp>
#include <asio_rdma/file_transfer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace asio_rdma::detail {

/// An owned file descriptor (-1: none).
class unique_fd {
public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(o.release()) {}
  unique_fd& operator=(unique_fd&& o) noexcept;
  ~unique_fd();
  int get() const noexcept { return fd_; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const noexcept { return fd_ >= 0; }

private:
  int fd_ = -1;
};

/// Stores and removes a probe file in the directory `dir` the way received
/// files are stored (create, write, fsync if `durable`, commit without
/// replacing, fsync of the directory if `durable`) and returns the commit
/// method that works there: renameat2(RENAME_NOREPLACE), or link()+unlink()
/// where the filesystem refuses rename flags. On failure `ec` is set and
/// `failed_step` names the step that failed ("create a file", "link", ...).
commit_method probe_commit_method(int dir, bool durable, const char*& failed_step,
                                  error_code& ec) noexcept;

/// Opens (creating them with mode 0755 where missing) the directories
/// `components` below `root`; symbolic links are refused (ELOOP/ENOTDIR).
unique_fd open_directories(int root, std::span<const std::string> components, error_code& ec);

/// A directory opened once for several files (a batch's records), shared by
/// their partial_files.
using shared_directory = std::shared_ptr<const unique_fd>;

/// Bytes an unprivileged writer may still use on the file system of the
/// directory `dir` (statvfs f_bavail * f_frsize).
std::uint64_t free_space(int dir, error_code& ec) noexcept;

/// A file being received: NAME.part in its directory until commit().
class partial_file {
public:
  partial_file() noexcept = default;
  partial_file(partial_file&& other) noexcept
      : directory_(std::move(other.directory_)), file_(std::move(other.file_)),
        name_(std::exchange(other.name_, {})), temporary_(std::exchange(other.temporary_, {})) {}
  partial_file& operator=(partial_file&& other) noexcept;
  /// Removes the unfinished file.
  ~partial_file() { discard(); }

  /// Creates a new, unique temporary DIR/NAME.XXXXXX.part below `root`
  /// (COMPONENTS = DIR..., NAME; NAME is shortened in the temporary's name
  /// where the whole would exceed NAME_MAX), mode 0600 until commit.
  static partial_file create(int root, std::span<const std::string> components, error_code& ec);
  /// As create(), in the open directory `directory` (NAME = `name`).
  static partial_file create_in(shared_directory directory, const std::string& name,
                                error_code& ec);

  /// Opens (or creates) the kept temporary of a resumable transfer,
  /// DIR/NAME.<key>.resume.part, and locks it (flock) for this transfer.
  /// `offset` receives its length: the bytes an interrupted transfer left,
  /// 0 for a new one or one older than `max_age` (then emptied). `busy` is
  /// set (and nothing opened) when another transfer holds it.
  static partial_file open_resumable(int root, std::span<const std::string> components,
                                     std::string_view key, std::chrono::seconds max_age,
                                     std::uint64_t& offset, bool& busy, error_code& ec);
  /// Removes the kept temporaries (*.resume.part) below `directory` whose
  /// last change is older than `max_age` (all of them for 0), without
  /// following symbolic links. Returns how many were removed.
  static std::size_t remove_stale(const std::filesystem::path& directory,
                                  std::chrono::seconds max_age) noexcept;

  bool is_open() const noexcept { return static_cast<bool>(file_); }
  /// CRC-32C of the file's first `length` bytes (read back from disk).
  std::uint32_t prefix_crc(std::uint64_t length, error_code& ec) const noexcept;
  /// Cuts the file to `length` bytes.
  void truncate(std::uint64_t length, error_code& ec) noexcept;
  /// Closes the file and leaves it where it is (an interrupted resumable
  /// transfer); nothing is removed.
  void keep() noexcept;
  /// Writes all of `data` at `offset`.
  void write_at(std::span<const std::byte> data, std::uint64_t offset, error_code& ec) noexcept;
  /// Whether NAME exists in the temporary's directory (any kind of entry).
  bool target_exists() const noexcept;
  /// Bytes an unprivileged writer may still use on the temporary's file
  /// system (statvfs f_bavail * f_frsize).
  std::uint64_t free_space(error_code& ec) const noexcept { return detail::free_space(dir(), ec); }
  /// Applies `mode`, fsyncs the file if `durable`, closes it and gives it the
  /// name NAME by `policy`: replace (rename, atomically), refuse (by `method`
  /// without replacing; errc::file_exists if NAME exists) or keep_both (NAME,
  /// else STEM.1.EXT, STEM.2.EXT, ...: the first free one). Then fsyncs the
  /// directory if `durable` and `sync_directory` (without it, the caller
  /// does, once for several files, before reporting any of them stored).
  /// `stored_name` receives the final name of the file in its directory. On
  /// failure the temporary is removed and failed_step() names the step that
  /// failed.
  void commit(std::uint32_t mode, bool durable, overwrite_policy policy, commit_method method,
              std::string& stored_name, error_code& ec, bool sync_directory = true) noexcept;
  /// The step of the last commit() that failed ("fsync", "link to the final
  /// name", ...), for messages; empty if none did.
  const char* failed_step() const noexcept { return failed_step_; }
  /// Closes and removes the temporary (nothing if already committed).
  void discard() noexcept;

private:
  int dir() const noexcept { return directory_ ? directory_->get() : -1; }

  shared_directory directory_;
  unique_fd file_;
  std::string name_;
  std::string temporary_;
  const char* failed_step_ = "";
};

} // namespace asio_rdma::detail
