// asio-rdma: awaitable file transfer over an RC connection (files and trees),
// the sending operations and the receiving server.
//
// Data goes by RDMA write with immediate into slots of registered memory that
// the receiver advertises; the chunk size is negotiated to the smaller of the
// two sides' buffer sizes; every file is checked with CRC-32C and written to
// a temporary NAME.XXXXXX.part until complete (NAME.KEY.resume.part for a
// resumable transfer, kept when the connection is lost so that a later
// transfer continues from it). Wire format (version 2): docs/file_transfer.md
// (encoded and decoded in the library, lib/file_transfer/protocol.hpp).
#pragma once

#include <asio_rdma/acceptor.hpp>
#include <asio_rdma/connection.hpp>
#include <asio_rdma/detail/pending_operation.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asio_rdma {

/// What a send operation's progress callback sees.
struct transfer_progress {
  /// File bytes the receiver has confirmed (credited chunks) so far.
  std::uint64_t bytes_done = 0;
  /// File bytes the operation sends in all (the sizes of its files when it
  /// started).
  std::uint64_t bytes_total = 0;
  /// Of bytes_done: bytes the receiver already had from an interrupted
  /// earlier transfer (file_transfer_options::resume), not sent again.
  std::uint64_t bytes_resumed = 0;
  /// From the start of the operation.
  std::chrono::nanoseconds elapsed{0};
  /// (bytes_done - bytes_resumed) / elapsed, in bytes per second (0 at
  /// first): the rate of what actually crosses the wire.
  double bytes_per_second = 0;
};

/// Options of a sending side (async_send_file, async_send_tree) and, with
/// file_receiver_options, of a receiving side.
struct file_transfer_options {
  /// Chunk size this side offers (bytes). The transfer uses the smaller of the
  /// sender's and the receiver's value (librdmaft's rule).
  std::size_t buffer_size = std::size_t(1) << 20;
  /// Chunks in flight at once; the transfer uses the smaller of both sides'.
  std::uint16_t depth = 4;
  /// Bound on every single wait (the handshake, room for the next chunk, the
  /// receiver's verdict on a file). When it passes, the connection is closed
  /// and the operation fails with asio::error::timed_out.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  /// Shared secret (any bytes; empty: none). On a receiver that has one,
  /// every connection must prove it knows the same secret (HMAC-SHA256 over
  /// a random nonce of the receiver's) before any file is created; otherwise
  /// both sides fail with errc::authentication_failed and nothing is written.
  /// A sender's secret is used only when the receiver asks for it. Without
  /// one, a receiver accepts files from anyone who can reach its port.
  std::string secret;
  /// Sending side: called on the connection's executor with the progress of
  /// the operation, at most once every progress_interval while data flows,
  /// and once more when the operation succeeded (then bytes_done ==
  /// bytes_total). May be empty. It must not start another transfer on the
  /// connection.
  std::function<void(const transfer_progress&)> on_progress;
  /// The least time between two progress calls (before the final one).
  std::chrono::milliseconds progress_interval = std::chrono::milliseconds(200);
  /// Sending side: make files resumable. The receiver then keeps what it
  /// has of a file whose transfer is interrupted (lost connection, killed
  /// sender, timeout) as NAME.KEY.resume.part, the key derived from the
  /// name, the size and the sender's address; and a later resumable transfer
  /// of the same file (same name and size, from the same address) continues
  /// from it: the receiver reports the length it holds and the CRC-32C of
  /// those bytes, the sender compares them with its own file's first bytes
  /// and sends only the rest (or everything, if they differ). The whole file
  /// is still checked by CRC-32C at its end. transfer_result::bytes_resumed
  /// and bytes_sent tell what was skipped and what was sent.
  bool resume = false;

  /// Smallest buffer_size accepted (bytes).
  static constexpr std::size_t min_buffer_size = 512;
  /// Largest buffer_size accepted (256 MiB).
  static constexpr std::size_t max_buffer_size = std::size_t(256) << 20;
  /// Largest depth accepted (chunks in flight).
  static constexpr std::uint16_t max_depth = 256;

  /// Names the first option that is out of range, or returns nullptr.
  const char* problem() const noexcept {
    if (buffer_size < min_buffer_size || buffer_size > max_buffer_size)
      return "buffer_size must be 512 bytes..256 MiB";
    if (depth == 0 || depth > max_depth)
      return "depth must be 1..256";
    if (timeout.count() <= 0)
      return "timeout must be positive";
    if (progress_interval.count() <= 0)
      return "progress_interval must be positive";
    return nullptr;
  }
  /// errc::invalid_option if problem() names one, else success.
  error_code validate() const noexcept {
    return problem() ? error_code(errc::invalid_option) : error_code();
  }
};

/// What a send operation reports when it completes.
struct transfer_result {
  /// Files and directories the receiver confirmed.
  std::uint64_t files = 0;
  /// File bytes the receiver confirmed.
  std::uint64_t bytes = 0;
  /// From the start of the operation to its completion.
  std::chrono::nanoseconds elapsed{0};
  /// The negotiated chunk size (0 if the handshake did not happen).
  std::size_t chunk_size = 0;
  /// File bytes that crossed the wire and were confirmed by the receiver
  /// (including those of a file that then failed).
  std::uint64_t bytes_sent = 0;
  /// Of `bytes`: bytes of resumed files that the receiver already had
  /// (file_transfer_options::resume) and that were not sent again.
  std::uint64_t bytes_resumed = 0;

  /// bytes / elapsed, in bytes per second (0 for an instant transfer).
  double bytes_per_second() const noexcept {
    double s = std::chrono::duration<double>(elapsed).count();
    return s > 0 ? static_cast<double>(bytes) / s : 0.0;
  }
};

namespace detail {
// The sender's entry into lib/ (see detail/pending_operation.hpp).
using transfer_operation = pending_operation<void(error_code, transfer_result)>;
void start_send_paths(connection& conn, std::filesystem::path path, bool tree,
                      const file_transfer_options& options, transfer_operation&& pending);

/// async_send_file (tree = false) and async_send_tree (tree = true) over `conn`, which
/// outlives the operation. A connection that is not open completes with not_connected,
/// posted. The connection's executor is copied (a file transfer is not on the data path).
class initiate_async_send_paths
    : public io_initiation<connection*, executor_held::by_value> {
public:
  initiate_async_send_paths(connection& conn, bool tree)
      : io_initiation(&conn, conn.get_executor()), tree_(tree) {}
  template <typename Handler>
  void operator()(Handler&& handler, const std::filesystem::path& path,
                  const file_transfer_options& options) const {
    if (!impl_->is_open())
      return closed(std::move(handler), boost::asio::error::not_connected, transfer_result());
    start_send_paths(*impl_, path, tree_, options,
                     pending<void(error_code, transfer_result)>(std::forward<Handler>(handler)));
  }

private:
  bool tree_;
};
} // namespace detail

/// Sends one regular file over `conn` to a file_receiver, which stores it
/// under its directory by the file's name (path.filename()).
///
/// The sender offers options.buffer_size and options.depth; the receiver
/// answers with the smaller values and the registered slots to RDMA-write
/// into. The name, size and permission bits go first; the data follows in
/// chunks, `depth` of them in flight; then the CRC-32C of the data, and the
/// receiver's verdict completes the file. Several transfers may follow each
/// other on one connection (never two at once).
///
/// Completion signature: void(error_code, transfer_result). The handler runs
/// on its associated executor (default: the connection's), never inside this
/// function. `conn` must outlive the operation; `path` is copied.
///
/// Errors: errc::invalid_option; the file's open/read error
/// (system_category, e.g. no_such_file_or_directory, before anything is
/// sent); errc::protocol_error (the receiver refused the name or the
/// sender's messages, or sent something invalid); errc::remote_failure (the
/// receiver could not write the file, or the checksum or size did not
/// match); asio::error::timed_out; asio::error::eof / operation_aborted /
/// wc_category() errors when the connection ends. On any failure after the
/// handshake began the connection is closed and the receiver discards the
/// unfinished file, unless options.resume is set: then an interrupted file
/// (not one the receiver refused) is kept by the receiver, and a new
/// connection sending it again with resume continues where it stopped.
///
/// Cancellation: terminal cancellation through the handler's slot abandons
/// the transfer (asio::error::operation_aborted) and closes the connection;
/// RDMA writes already posted are flushed first.
template <typename CompletionToken = boost::asio::deferred_t>
auto async_send_file(connection& conn, const std::filesystem::path& path,
                     const file_transfer_options& options, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, transfer_result)>(
      detail::initiate_async_send_paths(conn, false), token, path, options);
}

/// Sends the directory `directory` with everything below it, like `cp -r`:
/// the receiver recreates it as DIR/<directory's name>/... Regular files and
/// directories are sent (empty directories too); symbolic links, devices and
/// sockets are skipped, and links are not followed.
///
/// Completion signature, lifetimes, errors and cancellation as for
/// async_send_file; transfer_result::files counts directories and files.
/// boost::system::errc::not_a_directory (ENOTDIR in system_category) if
/// `directory` is not one, before anything is sent.
template <typename CompletionToken = boost::asio::deferred_t>
auto async_send_tree(connection& conn, const std::filesystem::path& directory,
                     const file_transfer_options& options, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, transfer_result)>(
      detail::initiate_async_send_paths(conn, true), token, directory, options);
}

/// One file (or directory) a file_receiver stored.
struct received_file {
  /// Where it is now: the receiver's directory joined with the sent name.
  std::filesystem::path path;
  /// The relative name the sender gave.
  std::string name;
  /// Its size in bytes (0 for a directory).
  std::uint64_t size = 0;
  /// Permission bits applied (the sender's, masked with 0777).
  std::uint32_t mode = 0;
  /// True if it is a directory.
  bool directory = false;
  /// The file and its directory entry were fsync'ed before the name was
  /// reported (file_receiver_options::fsync); false for directories.
  bool durable = false;
};

/// What one served connection brought.
struct receive_result {
  /// The sender's address.
  boost::asio::ip::tcp::endpoint peer;
  /// Files and directories completed on this connection, in order.
  std::vector<received_file> files;
  /// File bytes stored.
  std::uint64_t bytes = 0;
  /// From accepting the connection to its end.
  std::chrono::nanoseconds elapsed{0};
  /// The chunk size negotiated last (0 if no handshake happened).
  std::size_t chunk_size = 0;
  /// When the connection ended in a filesystem error: what the receiver was
  /// doing, on which name, and what the filesystem said, for the log (for
  /// example "storing a/b.bin: link to the final name: Operation not
  /// permitted"). Empty otherwise.
  std::string failure;
};

/// How a file_receiver makes a complete file appear under its name without
/// replacing an existing one (overwrite_policy::refuse and keep_both). It is
/// chosen once per receive directory when the receiver starts, by trying it
/// on a probe file there (file_receiver::commit_method()). Both are atomic: a
/// stored name is always exactly one sender's complete file, and of two
/// transfers of one name at once exactly one gets it.
enum class commit_method {
  /// renameat2(RENAME_NOREPLACE): check and rename in one step. Local
  /// filesystems (ext4, XFS, Btrfs, tmpfs). Where a subdirectory is the
  /// mount point of a filesystem without it, that file falls back to
  /// link_unlink.
  rename_noreplace,
  /// link() of the temporary to the name (EEXIST if the name exists), then
  /// unlink() of the temporary: for filesystems that refuse rename flags
  /// (NFS, CIFS, 9p and many FUSE and parallel filesystems). On NFS a LINK
  /// retransmitted after a lost reply answers EEXIST although it succeeded;
  /// that case is told apart by the temporary's link count (2), as open(2)
  /// describes for O_EXCL on NFS.
  link_unlink,
};

/// What a file_receiver does when a file of the sent name already exists.
enum class overwrite_policy {
  /// Refuse the file: the sender fails with errc::file_exists ("file exists
  /// on receiver"), checked when the file begins and again, atomically, when
  /// it is renamed into place. The default.
  refuse,
  /// Replace the existing file atomically (rename).
  replace,
  /// Keep both: store the new file as STEM.1.EXT (STEM.2.EXT, ...), the
  /// first name that is free; received_file::path names it.
  keep_both,
};

/// Options of a file_receiver.
struct file_receiver_options {
  /// buffer_size: the receiver's chunk size limit (the negotiated chunk is the
  /// smaller of both sides'); depth: slots offered; timeout: bound on every
  /// wait for the sender, including an idle connection between transfers.
  file_transfer_options transfer;
  /// Options of the listener and of accepted connections.
  acceptor_options acceptor;
  /// Called on the receiver's executor for every file and directory stored
  /// (librdmaft's rdmaft_recv_cb). May be empty.
  std::function<void(const received_file&)> on_file;
  /// fsync the file, and its directory after the rename, before the name is
  /// reported to the sender (durable against a crash of the receiver's host).
  bool fsync = true;
  /// An existing file of the same name: refused by default, never replaced
  /// unless asked for.
  overwrite_policy overwrite = overwrite_policy::refuse;
  /// Largest file accepted (bytes); a larger one is refused when it begins
  /// with errc::file_too_large, before anything is written. Default: no limit
  /// but the free space.
  std::uint64_t max_file_size = std::uint64_t(-1);
  /// Connections served at once from one peer address; a connection over
  /// the limit is refused at its hello with errc::too_many_requests (on both
  /// sides) and closed. 0: no limit.
  std::size_t max_connections_per_peer = 16;
  /// Files being received at once from one peer address (over all its
  /// connections); a file over the limit is refused when it begins with
  /// errc::too_many_requests, before anything is written. 0: no limit.
  std::size_t max_files_in_flight_per_peer = 8;
  /// How long the unfinished file of an interrupted resumable transfer
  /// (NAME.KEY.resume.part) is kept for a sender to resume it. Older ones
  /// are removed when the receiver starts (below its directory) and are not
  /// resumed (the file starts over). Zero: nothing is kept; resumable
  /// transfers are discarded when interrupted, like the others.
  std::chrono::seconds resume_max_age = std::chrono::hours(24);
  /// Where the disk writes and the checksum of received chunks run. Empty
  /// (the default): the receiver's executor. Give the executor of an
  /// asio::thread_pool (one thread is enough) to take the disk off the
  /// network path: the receiver then goes on receiving while chunks are
  /// written. Each connection's chunks are written in order (through a
  /// strand), at most `depth` of them at once (a chunk's slot is handed
  /// back only when it is on disk). The executor must outlive the receiver's
  /// connections.
  boost::asio::any_io_executor disk_executor;
};

/// What file_receiver::async_run calls, on the receiver's executor, each time
/// one of its connections ends: with the error that ended it (none when the
/// sender disconnected between files) and the files it completed, as
/// file_receiver::async_receive_one would report them. Any callable with the
/// signature void(error_code, const receive_result&) converts to it.
using receive_session_callback = std::function<void(error_code, const receive_result&)>;

namespace detail {
class file_receiver_impl;
// The receiver's entries into lib/ (see detail/pending_operation.hpp).
using receive_one_operation = pending_operation<void(error_code, receive_result)>;
void start_receive_one(const std::shared_ptr<file_receiver_impl>& impl,
                       receive_one_operation&& pending);
void start_run(const std::shared_ptr<file_receiver_impl>& impl, receive_session_callback on_session,
               pending_operation<void(error_code)>&& pending);

/// The base of file_receiver's initiation objects: the receiver's state (empty for a
/// receiver moved from, whose operations complete with bad_descriptor, posted) and executor.
using file_receiver_initiation = io_initiation<std::shared_ptr<file_receiver_impl>>;

/// file_receiver::async_receive_one.
class initiate_async_receive_one : public file_receiver_initiation {
public:
  using file_receiver_initiation::file_receiver_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, receive_result());
    start_receive_one(impl_, pending<void(error_code, receive_result)>(std::forward<Handler>(handler)));
  }
};

/// file_receiver::async_run.
class initiate_async_run : public file_receiver_initiation {
public:
  using file_receiver_initiation::file_receiver_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, receive_session_callback on_session) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor);
    start_run(impl_, std::move(on_session), pending<void(error_code)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// A receiving server (librdmaft's rdmaft_start_recv): listens for senders
/// and stores what they send under one directory.
///
/// Names from the wire are checked: absolute names, "..", "." and empty
/// components are refused with errc::protocol_error; intermediate components
/// that are symbolic links are not followed, so nothing is ever written
/// outside the directory. A file is written to a temporary of its own,
/// NAME.XXXXXX.part (unique per transfer), and renamed to NAME only when its
/// size and CRC-32C match; an unfinished or failed file is removed (an
/// interrupted resumable one is kept, see file_transfer_options::resume). An
/// existing NAME is handled by file_receiver_options::overwrite (refused by
/// default); with overwrite_policy::replace it is replaced atomically: when
/// several senders send the same name at once, NAME ends up as exactly one of
/// their complete files (the last to finish), never a mixture. Files larger
/// than max_file_size or the free space are refused (errc::file_too_large,
/// errc::no_space) before anything is written.
///
/// Disk writes run on file_receiver_options::disk_executor (by default the
/// receiver's executor; the library starts no thread of its own). Unfinished
/// files of resumable transfers are kept for resume_max_age (see
/// file_transfer_options::resume).
///
/// Use from the executor's thread. Move-only; destroying it stops it (see
/// stop()).
class file_receiver {
public:
  /// The type of the executor that runs handlers by default.
  using executor_type = boost::asio::any_io_executor;

  /// Listens on `address`:`port` (port 0: a free one, see local_endpoint())
  /// and stores into `directory`, which must exist. Before listening it
  /// stores and removes a probe file there (create, write, fsync when
  /// options.fsync, commit, fsync of the directory), so that a directory
  /// that cannot hold files is found now, not after a transfer; this also
  /// chooses the commit_method. Throws boost::system::system_error:
  /// errc::invalid_option for bad options; the filesystem's error for a
  /// directory that does not exist or cannot store files, with a message
  /// "cannot store files in DIR: STEP: ERROR"; or the listener's errors.
  file_receiver(const executor_type& ex, const std::string& address, std::uint16_t port,
                const std::filesystem::path& directory, file_receiver_options options = {});
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  file_receiver(file_receiver&&) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  file_receiver& operator=(file_receiver&&) noexcept;
  file_receiver(const file_receiver&) = delete;
  file_receiver& operator=(const file_receiver&) = delete;
  /// Calls stop().
  ~file_receiver();

  /// The executor that runs handlers by default.
  executor_type get_executor() const noexcept { return ex_; }
  /// The address and port listened on.
  boost::asio::ip::tcp::endpoint local_endpoint() const;
  /// The directory files are stored in (absolute).
  const std::filesystem::path& directory() const;
  /// How files are committed without replacing in that directory (chosen
  /// when the receiver started; see commit_method).
  asio_rdma::commit_method commit_method() const;

  /// Sets the buffer size offered to connections accepted from now on
  /// (librdmaft's rdmaft_reset_recv_buffer_size). A connection already being
  /// served keeps the size it was accepted with, for all its transfers.
  /// errc::invalid_option (and nothing changes) if out of range.
  void set_buffer_size(std::size_t buffer_size, error_code& ec);
  /// As above; throws boost::system::system_error instead.
  void set_buffer_size(std::size_t buffer_size);

  /// Accepts one connection and serves it until the sender disconnects.
  ///
  /// Completion signature: void(error_code, receive_result). Success when the
  /// sender disconnected between files; otherwise the error that ended the
  /// connection (errc::protocol_error for a refused name or malformed
  /// messages, asio::error::eof when the sender left in the middle of a file,
  /// asio::error::timed_out, asio::error::operation_aborted after stop()),
  /// with the files completed so far in the result. The handler runs on its
  /// associated executor (default: the receiver's).
  ///
  /// Cancellation: terminal cancellation abandons the wait or the connection
  /// (its unfinished file is removed, or kept if resumable). The receiver
  /// must outlive the call.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_receive_one(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, receive_result)>(
        detail::initiate_async_receive_one(impl_, ex_), token);
  }

  /// Serves any number of connections at once until stop(); calls
  /// `on_session(error_code, const receive_result&)` on the receiver's
  /// executor when each connection ends (see receive_session_callback). A
  /// failed handshake or connection does not stop the server.
  ///
  /// Completion signature: void(error_code): asio::error::operation_aborted
  /// after stop() (or cancellation), once every connection has ended; an
  /// error of the listener otherwise.
  ///
  /// Cancellation: terminal cancellation acts as stop().
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_run(receive_session_callback on_session, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code)>(
        detail::initiate_async_run(impl_, ex_), token, std::move(on_session));
  }

  /// Stops (librdmaft's rdmaft_stop_recv): closes the listener and every
  /// connection being served; pending async_receive_one / async_run complete
  /// with asio::error::operation_aborted and unfinished files are removed
  /// (resumable ones are kept, see file_transfer_options::resume).
  /// Files already completed stay. Further operations fail the same way.
  void stop() noexcept;

private:
  executor_type ex_;
  std::shared_ptr<detail::file_receiver_impl> impl_;
};

} // namespace asio_rdma
