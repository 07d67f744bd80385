// One connection of a file_receiver: answers the handshake with registered
// slots, checks names, writes chunks to NAME.part, verifies and commits.
//
// Chunks go to disk off the network path: each is checksummed and written by
// a job on a strand of file_receiver_options::disk_executor (in order), while
// the session goes on receiving; the job's completion, back on the
// connection's executor, sends the chunk's credit. A chunk's slot is handed
// back (credited) only once it is on disk, so at most `slots` chunks are
// ever in flight, and the slot's bytes stay put while the job reads them.
#pragma once

#include "deadline.hpp"
#include "receiver_impl.hpp"

#include "protocol.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/strand.hpp>

#include <array>
#include <optional>
#include <vector>

namespace asio_rdma::detail {

/// While a receive_session stores a file_batch: the directory its last file
/// went to, shared by its files, and the files stored there and not yet
/// reported. (Not nested in receive_session: clang 16 cannot default-construct
/// a nested class with member initializers in an optional member.)
struct batch_state {
  std::vector<std::string> parent;
  shared_directory directory;
  std::uint64_t free = 0; ///< the directory's free space, less the files admitted
  std::vector<received_file> stored;
};

class receive_session {
public:
  /// `over_limit`: the peer has too many connections; this one is refused
  /// at its hello.
  receive_session(file_receiver_impl& impl, connection& conn, receive_result& result,
                  bool over_limit);
  /// Releases the peer's file-in-flight count if a file is open.
  ~receive_session();
  receive_session(const receive_session&) = delete;
  receive_session& operator=(const receive_session&) = delete;

  /// Runs until the sender disconnects between files (success) or an error.
  boost::asio::awaitable<error_code> run();

private:
  /// Small messages in flight (credits, and the ok statuses of files), each
  /// in its own buffer until its send completed; shared with the send
  /// handlers, which may outlive the session.
  struct credit_ring {
    std::vector<std::array<std::byte, 32>> buffers;
    std::vector<unsigned char> busy;
    error_code error;
    /// The session while it lives (a completing send pumps the next credits).
    receive_session* owner = nullptr;
  };

  /// Queues `data` (a slot) to be checksummed and written at `offset` by
  /// the disk strand; on_written() follows on the connection's executor.
  void submit(std::span<const std::byte> data, std::uint64_t offset);
  /// A chunk is on disk (or failed with `ec`): credit it, or stop the loop.
  void on_written(error_code ec);
  /// Sends the credits of the chunks on disk, in order, as buffers free up.
  void pump_credits();
  /// A credit is due that is not held back for the file's status.
  bool credit_sendable() const noexcept;
  /// Waits until every submitted chunk is written and its credit posted.
  boost::asio::awaitable<void> drain();

  boost::asio::awaitable<error_code> on_hello(const file_protocol::hello& m);
  /// Challenge-response on the shared secret: success only for a valid proof.
  boost::asio::awaitable<error_code> authenticate();
  boost::asio::awaitable<error_code> on_begin(const file_protocol::file_begin& m);
  /// Admits the entry of a file_begin or a batch record: a directory is
  /// created (`directory`), a file's temporary opened (`offset`: the bytes a
  /// kept resumable one holds); refuses it otherwise.
  boost::asio::awaitable<error_code> open_entry(const file_protocol::file_begin& m, bool& directory,
                                                std::uint64_t& offset);
  /// Every record of a batch stored, then one ok status.
  boost::asio::awaitable<error_code> on_batch(const file_protocol::file_batch& m);
  /// Stores the records of a batch in order; the first failure refuses its
  /// record and ends it.
  boost::asio::awaitable<error_code> store_batch(const file_protocol::file_batch& m);
  /// The open directory `parent` (below the receiving directory) for a
  /// batch's file: the last one's again if the same, else opened anew
  /// (sync_batch() first) with its free space read.
  shared_directory batch_directory(std::span<const std::string> parent, error_code& ec);
  /// fsyncs the batch's directory (if durable) and reports the files stored
  /// in it: once per directory and batch, not once per file.
  error_code sync_batch();
  /// Chunk `sequence` of `size` bytes is in its slot: told by a write's immediate data,
  /// or on iWARP by a chunk_written message.
  boost::asio::awaitable<error_code> on_chunk(std::uint32_t sequence, std::size_t size);
  boost::asio::awaitable<error_code> on_end(const file_protocol::file_end& m);
  /// Checks the open file's size and CRC-32C against `m` and commits it
  /// (the caller answers); refuses it otherwise.
  boost::asio::awaitable<error_code> store(const file_protocol::file_end& m);
  /// Answers a resumable file_begin with a resume_point for the `offset`
  /// bytes the kept file holds.
  boost::asio::awaitable<error_code> offer_resume(std::uint32_t file_id, std::uint64_t offset);
  boost::asio::awaitable<error_code> on_resume_from(const file_protocol::resume_from& m);
  /// The loop of run(); run() then keeps an interrupted resumable file.
  boost::asio::awaitable<error_code> serve();
  /// Opens the file of a file_begin: the kept temporary of a resumable one
  /// (`offset`: the bytes it holds), else a new temporary.
  partial_file open_file(const file_protocol::file_begin& m,
                         std::span<const std::string> components, std::uint64_t& offset,
                         error_code& ec);
  /// Sends a status, crediting every chunk written so far, and waits for its
  /// completion (a refusal: the session ends next).
  boost::asio::awaitable<error_code> reply(std::uint32_t file_id, file_protocol::status_code code);
  /// Sends an ok status through the credit ring without waiting for its
  /// completion (a round trip): the next entry, often already here, goes on.
  boost::asio::awaitable<error_code> post_ok(std::uint32_t file_id);
  /// The status of `file_id` with `code`, crediting every chunk written.
  file_protocol::status make_status(std::uint32_t file_id, file_protocol::status_code code);
  /// Sends `m` from ring buffer `index` (free), in order with the credits.
  void send_from_ring(std::size_t index, const file_protocol::message& m);
  /// Replies with `code` and returns `ec` (the session's error).
  boost::asio::awaitable<error_code> refuse(std::uint32_t file_id, file_protocol::status_code code,
                                            error_code ec);
  /// refuse() for a failed write or commit: no_space for ENOSPC/EDQUOT,
  /// file_exists, `otherwise` for the rest. What the receiver was doing
  /// (`doing`, e.g. "writing NAME: pwrite") goes to receive_result::failure.
  boost::asio::awaitable<error_code>
  refuse_write(std::uint32_t file_id, error_code ec, std::string_view doing,
               file_protocol::status_code otherwise = file_protocol::status_code::io_error);
  /// refuse() with io_error for a file that could not be created or read,
  /// noting what the receiver was doing in receive_result::failure.
  boost::asio::awaitable<error_code> refuse_io(std::uint32_t file_id, error_code ec,
                                               std::string_view doing);
  void completed(received_file f);
  /// Ends the current file's count against max_files_in_flight_per_peer.
  void release_file_slot() noexcept;

  file_receiver_impl& impl_;
  connection& conn_;
  receive_result& result_;
  deadline deadline_;
  /// The receiver's buffer size when this connection was accepted:
  /// set_buffer_size() applies to later connections only.
  std::size_t buffer_size_;
  std::shared_ptr<credit_ring> credits_;
  memory_region slots_;
  file_protocol::hello_ack ack_;
  std::size_t next_credit_buffer_ = 0;

  // The disk path (see the top of this file). crc_ and the file's offset
  // are the strand's while chunks are submitted and not yet written.
  /// The connection's executor, copied once: disk jobs post their
  /// completion to it from the disk's thread without touching conn_.
  boost::asio::any_io_executor net_;
  boost::asio::strand<boost::asio::any_io_executor> disk_;
  std::uint32_t submitted_ = 0;   ///< chunks handed to the strand (this file)
  std::uint32_t written_ = 0;     ///< of them, completed (on_written ran)
  std::uint32_t credits_due_ = 0; ///< written, credit not yet posted
  std::uint32_t next_credit_ = 0; ///< sequence of the next credit (of the transfer)
  /// The credit of the current file's last chunk waits for the file's status
  /// (one message fewer per file).
  bool holding_ = false;
  std::uint32_t held_sequence_ = 0;
  /// Files up to this size are written on the connection's executor, not
  /// handed to the disk strand: for them the hand-over costs more than the
  /// write (two thread wake-ups per chunk; measured in bench/RESULTS.md).
  static constexpr std::uint64_t inline_write_limit = 64 * 1024;
  bool write_inline_ = false;         ///< the current file is written without the strand
  error_code disk_error_;             ///< the first failed write of this file
  bool disk_failed_ = false;          ///< the strand's own view of a failed write
  boost::asio::steady_timer drained_; ///< cancelled whenever a chunk is written or credited
  /// Wakes the receive loop when a write failed (the sender may be waiting
  /// for credits and send nothing more).
  boost::asio::cancellation_signal wake_;
  bool authenticated_ = false;
  bool over_limit_ = false;
  /// The current file counts against the peer's files in flight.
  bool file_slot_ = false;

  /// While a file_batch is stored (see batch_state).
  std::optional<batch_state> batch_;

  // The file being received.
  partial_file file_;
  std::string name_;
  std::uint32_t file_id_ = 0;
  std::uint32_t mode_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t received_ = 0;
  std::uint32_t next_sequence_ = 0; ///< of the next chunk, counted over the transfer
  bool notices_ = false; ///< the hello asked for chunk_written messages (iWARP)
  std::uint32_t crc_ = 0;
  /// Kept as NAME.<key>.resume.part when the connection is lost.
  bool resumable_ = false;
  /// A resume_point went out; the sender's resume_from comes next.
  bool awaiting_resume_ = false;
  std::uint64_t offered_ = 0;
  std::uint32_t offered_crc_ = 0;

  /// Largest file_batch a receiver takes (when its connection's messages are
  /// this large: 64 KiB by default).
  static constexpr std::size_t max_batch_size = std::size_t(1) << 20;
  /// Control messages and file batches are received here.
  std::vector<std::byte> in_;
  std::array<std::byte, 64> out_{};
};

} // namespace asio_rdma::detail
