// The sending side of the file transfer: handshake, then per entry
// file_begin / data chunks (RDMA write with immediate) / file_end, or small
// entries whole, many to a file_batch message; each confirmed by the
// receiver, pipelined (the next entry does not wait for the confirmations of
// the last). See docs/file_transfer.md.
#include "asio_alias.hpp"
#include "authentication.hpp"
#include "control.hpp"
#include "deadline.hpp"
#include "internal_access.hpp"
#include "partial_file.hpp"
#include "rc/connection_impl.hpp" // has_immediate_data
#include "send_entries.hpp"
#include "spawn_operation.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/file_transfer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

namespace asio_rdma::detail {

namespace proto = file_protocol;
using asio::awaitable;

namespace {

/// State the completion handlers of posted RDMA writes and control sends
/// share with the sender; it (and the memory they read) lives until the
/// last of them ran, even if the operation ended before.
struct write_tracker {
  /// Control messages in flight at once: the writer does not wait for a
  /// send's completion (a round trip) unless all of these are in flight.
  static constexpr std::size_t control_buffers = 8;

  explicit write_tracker(const asio::any_io_executor& ex)
      : signal(ex, asio::steady_timer::time_point::max()) {}
  /// Keeps the first error of a posted write or send.
  void note(error_code ec) noexcept {
    if (ec && !error)
      error = ec;
  }
  memory_region region;
  asio::steady_timer signal; // cancelled whenever a write or send completes
  std::uint64_t posted = 0;
  std::uint64_t done = 0;
  error_code error;
  std::array<std::array<std::byte, proto::max_message_size>, control_buffers> controls{};
  std::array<bool, control_buffers> control_busy{};
  std::size_t control_next = 0;
  /// On iWARP, each chunk's chunk_written message, in the chunk's local slot: free
  /// again when its send completed, which counts as the chunk's completion.
  std::vector<std::array<std::byte, 16>> notices;
  /// file_batch messages: one fills while the other is in flight.
  std::array<std::vector<std::byte>, 2> batches;
  std::array<bool, 2> batch_busy{};
  std::size_t batch_next = 0;
};

error_code status_error(proto::status_code code) noexcept {
  switch (code) {
  case proto::status_code::ok:
    return {};
  case proto::status_code::bad_name:
  case proto::status_code::protocol_error:
    return errc::protocol_error;
  case proto::status_code::stopped:
    return asio::error::operation_aborted;
  case proto::status_code::file_exists:
    return errc::file_exists;
  case proto::status_code::too_large:
    return errc::file_too_large;
  case proto::status_code::no_space:
    return errc::no_space;
  case proto::status_code::authentication_failed:
    return errc::authentication_failed;
  case proto::status_code::too_many_requests:
    return errc::too_many_requests;
  case proto::status_code::store_failed:
    return errc::store_failed;
  default:
    return errc::remote_failure;
  }
}

/// An answer the sender expects from the receiver, in the order the
/// receiver sends them (it handles the sender's messages one after the other).
struct expected_answer {
  enum kind_type : std::uint8_t { status, resume_point };
  std::uint32_t file_id = 0;
  kind_type kind = status;
  std::uint64_t size = 0; ///< bytes the entry adds to result_.bytes
  /// Chunks sent before the answer was asked for: a status credits exactly
  /// these (the receiver answers after the entry's last chunk).
  std::uint64_t chunks = 0;
  std::uint32_t files = 1;         ///< entries it answers (a batch's records)
  std::uint64_t batched_bytes = 0; ///< data sent in a batch: done when answered
};

/// Sends entries pipelined: the next file_begin goes out before the earlier
/// files' answers arrive (a receiver answers in order), so a tree of small
/// files costs no round trip per file. A writer (entries out) and a reader
/// (every answer and credit in, always consuming so neither side's sends
/// ever wait on the other's) run side by side on the connection's executor.
class file_sender {
public:
  file_sender(connection& conn, const file_transfer_options& options)
      : conn_(conn), options_(options), deadline_(conn.get_executor(), conn, options.timeout),
        writes_(std::make_shared<write_tracker>(conn.get_executor())) {}

  awaitable<error_code> run(const std::vector<send_entry>& entries) {
    using namespace asio::experimental::awaitable_operators;
    started_ = std::chrono::steady_clock::now();
    for (const auto& e : entries) {
      std::error_code sec;
      auto size = e.directory ? 0 : std::filesystem::file_size(e.local, sec);
      listed_.push_back(sec ? 0 : size);
      progress_.bytes_total += listed_.back();
    }
    offer(listed_);
    if (auto ec = co_await handshake())
      co_return ec;
    // The first to finish ends the other: the writer once every answer is
    // in, the reader only with an error.
    auto outcome = co_await (write(entries) || read());
    auto ec = std::visit([](error_code e) { return e; }, outcome);
    if (ec)
      co_return ec;
    report_progress(true);
    co_return error_code();
  }

  transfer_result& result() noexcept { return result_; }

private:
  /// Most answers outstanding: bounds how far the writer runs ahead.
  static constexpr std::size_t max_expected = 64;
  /// Largest file_batch this side builds, whatever the connections take.
  static constexpr std::size_t max_batch_size = std::size_t(1) << 20;

  /// operation_aborted once the operation was cancelled (a cancellation
  /// signalled between waits reaches no operation, so it is checked here).
  static awaitable<error_code> cancelled() {
    auto cs = co_await asio::this_coro::cancellation_state;
    co_return cs.cancelled() != asio::cancellation_type::none
        ? error_code(asio::error::operation_aborted)
        : error_code();
  }

  /// Receives the next control message into in_ (bounded by the timeout
  /// when `bounded`, else by the watchdog as the writer arms it).
  awaitable<error_code> receive(proto::message& out, bool bounded = true) {
    if (auto ec = co_await cancelled())
      co_return ec;
    if (bounded)
      deadline_.arm();
    auto [ec, m] = co_await conn_.async_receive_message(asio::buffer(in_), as_awaitable_tuple);
    if (bounded)
      deadline_.disarm();
    if (ec)
      co_return wait_error(ec, deadline_);
    if (m.immediate || m.rdma_write)
      co_return error_code(errc::protocol_error);
    std::span<const std::byte> bytes(in_.data(), m.size);
    out = proto::decode(bytes, ec);
    if (ec)
      co_return ec;
    // A failed status ends the transfer whenever it comes.
    if (auto* s = std::get_if<proto::status>(&out); s && s->code != proto::status_code::ok)
      co_return status_error(s->code);
    co_return error_code();
  }

  /// Offers no more memory than the files need: a chunk no larger than the
  /// largest file (whole pages), no more slots than chunks. Registering
  /// 1 MiB x 4 on both sides for a 1-byte file is most of its start-up.
  void offer(const std::vector<std::uint64_t>& sizes) {
    constexpr std::uint64_t page = 4096;
    std::uint64_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
    std::uint64_t chunk = std::clamp<std::uint64_t>(
        (largest + page - 1) / page * page, std::min<std::uint64_t>(page, options_.buffer_size),
        options_.buffer_size);
    std::uint64_t chunks = 0;
    for (auto size : sizes)
      chunks += (size + chunk - 1) / chunk;
    offered_chunk_ = static_cast<std::uint32_t>(chunk);
    offered_depth_ =
        static_cast<std::uint16_t>(std::clamp<std::uint64_t>(chunks, 1, options_.depth));
  }

  awaitable<error_code> handshake() {
    proto::hello hello;
    hello.chunk_size = offered_chunk_;
    hello.depth = offered_depth_;
    // Without immediate data (iWARP) each chunk's write is followed by a message.
    notices_ = !internal_access::impl(conn_)->has_immediate_data();
    hello.flags = notices_ ? proto::hello_chunk_notices : 0;
    proto::message m = hello;
    if (auto ec = co_await send_control(conn_, m, out_))
      co_return ec;
    if (auto ec = co_await receive(m))
      co_return ec;
    if (auto* c = std::get_if<proto::challenge>(&m)) {
      // The receiver wants the shared secret proven.
      if (options_.secret.empty())
        co_return error_code(errc::authentication_failed);
      m = make_proof(options_.secret, *c);
      if (auto ec = co_await send_control(conn_, m, out_))
        co_return ec;
      if (auto ec = co_await receive(m))
        co_return ec;
    }
    auto* ack = std::get_if<proto::hello_ack>(&m);
    if (!ack || ack->chunk_size == 0 || ack->chunk_size > offered_chunk_ || ack->slots == 0 ||
        ack->slots > offered_depth_ ||
        ack->buffer.length < std::uint64_t(ack->chunk_size) * ack->slots)
      co_return error_code(errc::protocol_error);
    ack_ = *ack;
    result_.chunk_size = ack_.chunk_size;
    lengths_.assign(ack_.slots, 0);
    if (notices_)
      writes_->notices.assign(ack_.slots, {});
    error_code ec;
    writes_->region =
        memory_region(conn_, std::size_t(ack_.chunk_size) * ack_.slots, access::local_write, ec);
    // Batches as large as both sides take (sent from plain memory: a send
    // copies it into the connection's registered buffers).
    batch_limit_ =
        std::min<std::size_t>({ack_.batch_limit, conn_.options().max_message_size, max_batch_size});
    if (batch_limit_ < proto::batch_header_size + proto::record_header_size + 1)
      batch_limit_ = 0;
    for (auto& b : writes_->batches)
      b.resize(batch_limit_);
    co_return ec;
  }

  // --- the writer ---------------------------------------------------------

  awaitable<error_code> write(const std::vector<send_entry>& entries) {
    co_await asio::this_coro::throw_if_cancelled(false);
    std::uint32_t file_id = 0;
    for (const auto& e : entries) {
      // No co_await inside ?: here: with `ec = dir ? co_await a : co_await b`
      // GCC 12 ran both operands (a file was offered as a directory, then as
      // a file), so if/else.
      error_code ec;
      if (batchable(e.name.size(), e.directory ? 0 : listed_[file_id]))
        ec = co_await batch_entry(e, file_id);
      else if (!(ec = co_await flush_batch()) && e.directory)
        ec = co_await send_directory(e, file_id);
      else if (!ec)
        ec = co_await send_file(e, file_id);
      if (ec)
        co_return ec;
      ++file_id;
    }
    if (auto ec = co_await flush_batch())
      co_return ec;
    // Done when the last answer is in.
    while (expected_count_ > 0)
      if (auto ec = co_await await_reader())
        co_return ec;
    co_return error_code();
  }

  /// Waits until the reader (or a completing RDMA write) changed something.
  awaitable<error_code> await_reader() {
    co_await writes_->signal.async_wait(as_awaitable_tuple);
    if (auto ec = co_await cancelled())
      co_return ec;
    co_return writes_->error;
  }

  /// Sends a control message without waiting for its completion (in order
  /// with everything posted before it); waits only for a free buffer.
  awaitable<error_code> post_control(const proto::message& m) {
    auto& w = *writes_;
    const std::size_t index = w.control_next % write_tracker::control_buffers;
    while (w.control_busy[index])
      if (auto ec = co_await await_reader())
        co_return ec;
    std::size_t n = proto::encode(m, w.controls[index]);
    if (n == 0)
      co_return error_code(errc::protocol_error);
    ++w.control_next;
    post_send(std::span<const std::byte>(w.controls[index].data(), n), w.control_busy[index]);
    co_return error_code();
  }

  /// Sends `message` (in writes_) without waiting: `busy` (in writes_ too)
  /// is true until the send completed.
  void post_send(std::span<const std::byte> message, bool& busy) {
    busy = true;
    conn_.async_send(asio::buffer(message.data(), message.size()),
                     [t = writes_, &busy](error_code ec, std::size_t) {
                       t->note(ec);
                       busy = false;
                       t->signal.cancel();
                     });
  }

  /// Notes an answer to expect, waiting while max_expected are outstanding.
  awaitable<error_code> expect(expected_answer a) {
    while (expected_count_ == max_expected)
      if (auto ec = co_await await_reader())
        co_return ec;
    expected_[(expected_head_ + expected_count_) % max_expected] = a;
    ++expected_count_;
    deadline_.arm(); // something is awaited now: the reader's wait is bounded
    co_return error_code();
  }

  // --- file batches ---------------------------------------------------------

  /// Whether an entry goes whole into a batch: it fits in an empty one (and
  /// is not resumable: a resume is negotiated per file).
  bool batchable(std::size_t name_length, std::uint64_t size) const noexcept {
    return batch_limit_ > 0 && !options_.resume &&
           proto::batch_builder::record_size(name_length, size) <=
               batch_limit_ - proto::batch_header_size;
  }

  /// Adds an entry to the batch (sent first if the entry does not fit in
  /// it); a file that grew too large since it was listed goes in chunks.
  awaitable<error_code> batch_entry(const send_entry& e, std::uint32_t file_id) {
    std::uint32_t mode = 0;
    std::uint64_t size = 0;
    unique_fd fd;
    if (e.directory) {
      std::error_code sec;
      auto perms = std::filesystem::status(e.local, sec).permissions();
      if (sec)
        co_return error_code(sec.value(), boost::system::system_category());
      mode = static_cast<std::uint32_t>(perms) & 07777;
    } else {
      fd = unique_fd(::open(e.local.c_str(), O_RDONLY | O_CLOEXEC));
      struct stat st {};
      if (!fd || ::fstat(fd.get(), &st) != 0)
        co_return from_errno();
      if (!S_ISREG(st.st_mode))
        co_return error_code(asio::error::invalid_argument);
      mode = st.st_mode & 07777;
      size = static_cast<std::uint64_t>(st.st_size);
      if (!batchable(e.name.size(), size)) {
        if (auto ec = co_await flush_batch())
          co_return ec;
        co_return co_await send_file(e, file_id);
      }
      progress_.bytes_total = progress_.bytes_total - listed_[file_id] + size;
    }
    if (batch_ && !batch_->fits(e.name.size(), size))
      if (auto ec = co_await flush_batch())
        co_return ec;
    if (!batch_) {
      auto& w = *writes_;
      const std::size_t index = w.batch_next % w.batches.size();
      while (w.batch_busy[index])
        if (auto ec = co_await await_reader())
          co_return ec;
      batch_.emplace(std::span<std::byte>(w.batches[index]), file_id);
    }
    auto kind = e.directory ? proto::entry_kind::directory : proto::entry_kind::file;
    auto data = batch_->add(kind, mode, e.name, static_cast<std::uint32_t>(size));
    if (!data.empty()) {
      if (auto ec = read_fully(fd.get(), data, 0))
        co_return ec;
      batch_->set_crc(proto::crc32c(0, data));
    }
    batch_bytes_ += size;
    co_return error_code();
  }

  /// Sends the batch being filled, if any, without waiting for its
  /// completion; one status will answer all of its records.
  awaitable<error_code> flush_batch() {
    if (!batch_)
      co_return error_code();
    expected_answer a;
    a.file_id = batch_->first_file_id() + batch_->count() - 1;
    a.size = batch_bytes_;
    a.chunks = posted_;
    a.files = batch_->count();
    a.batched_bytes = batch_bytes_;
    if (auto ec = co_await expect(a))
      co_return ec;
    std::size_t n = batch_->finish();
    batch_.reset();
    batch_bytes_ = 0;
    auto& w = *writes_;
    const std::size_t index = w.batch_next++ % w.batches.size();
    post_send(std::span<const std::byte>(w.batches[index].data(), n), w.batch_busy[index]);
    co_return error_code();
  }

  /// Sends a file_begin. A directory's status, or with `resume` a file's
  /// resume_point, comes to the reader; a file's begin is answered only
  /// when refused.
  awaitable<error_code> begin(const send_entry& e, std::uint32_t file_id, std::uint32_t mode,
                              std::uint64_t size, bool resume) {
    if (e.directory || resume) {
      expected_answer a;
      a.file_id = file_id;
      a.kind = resume ? expected_answer::resume_point : expected_answer::status;
      a.chunks = posted_;
      if (auto ec = co_await expect(a))
        co_return ec;
    }
    proto::file_begin b;
    b.file_id = file_id;
    b.kind = e.directory ? proto::entry_kind::directory : proto::entry_kind::file;
    b.mode = mode;
    b.size = size;
    b.name = e.name;
    b.flags = resume ? proto::flag_resume : 0;
    co_return co_await post_control(b);
  }

  /// CRC-32C of the first `length` bytes of `fd` (the prefix a receiver
  /// offers to resume from).
  static error_code prefix_crc(int fd, std::uint64_t length, std::uint32_t& crc) {
    std::vector<std::byte> buffer(std::size_t(1) << 20);
    crc = 0;
    for (std::uint64_t at = 0; at < length;) {
      auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - at));
      ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(at));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return from_errno();
      if (n == 0) // the file shrank
        return error_code(EIO, boost::system::system_category());
      crc = proto::crc32c(crc, std::span<const std::byte>(buffer.data(), std::size_t(n)));
      at += static_cast<std::uint64_t>(n);
    }
    return {};
  }

  awaitable<error_code> send_directory(const send_entry& e, std::uint32_t file_id) {
    std::error_code sec;
    auto perms = std::filesystem::status(e.local, sec).permissions();
    if (sec)
      co_return error_code(sec.value(), boost::system::system_category());
    co_return co_await begin(e, file_id, static_cast<std::uint32_t>(perms) & 07777, 0, false);
  }

  /// The receiver's resume_point for `file_id`, once the reader has it.
  awaitable<error_code> await_resume_point(std::uint32_t file_id, proto::resume_point& point) {
    while (!resume_.has_value())
      if (auto ec = co_await await_reader())
        co_return ec;
    point = *resume_;
    resume_.reset();
    if (point.file_id != file_id)
      co_return error_code(errc::protocol_error);
    co_return error_code();
  }

  awaitable<error_code> send_file(const send_entry& e, std::uint32_t file_id) {
    unique_fd fd(::open(e.local.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0)
      co_return from_errno();
    if (!S_ISREG(st.st_mode))
      co_return error_code(asio::error::invalid_argument);
    auto size = static_cast<std::uint64_t>(st.st_size);
    // The file changed since the operation listed it: so does the total.
    const auto listed = listed_[file_id];
    if (listed != size)
      progress_.bytes_total = progress_.bytes_total - listed + size;
    if ((size + ack_.chunk_size - 1) / ack_.chunk_size > std::numeric_limits<std::uint32_t>::max())
      co_return error_code(EFBIG, boost::system::system_category());
    std::uint64_t start = 0; // the data sent begins here (> 0 when resumed)
    std::uint32_t crc = 0;   // of the whole file up to where the data is
    if (auto ec = co_await begin(e, file_id, st.st_mode & 07777, size, options_.resume))
      co_return ec;
    if (options_.resume) {
      proto::resume_point point;
      if (auto ec = co_await await_resume_point(file_id, point))
        co_return ec;
      if (point.offset > size)
        co_return error_code(errc::protocol_error);
      std::uint32_t mine = 0;
      if (point.offset > 0) {
        if (auto ec = prefix_crc(fd.get(), point.offset, mine))
          co_return ec;
        // The receiver's bytes are this file's first bytes: keep them.
        if (mine == point.crc32c) {
          start = point.offset;
          crc = mine;
        }
      }
      proto::resume_from from;
      from.file_id = file_id;
      from.offset = start;
      if (auto ec = co_await post_control(from))
        co_return ec;
      progress_.bytes_done += start;
      progress_.bytes_resumed += start;
      result_.bytes_resumed += start;
    }
    std::uint64_t chunks = (size - start + ack_.chunk_size - 1) / ack_.chunk_size;
    for (std::uint64_t i = 0; i < chunks; ++i) {
      // Chunks are numbered over the transfer, and go round the receiver's
      // slots: this one's slot must have been handed back, and our own
      // buffer's previous write must have completed.
      const std::uint64_t seq = posted_;
      while (credits_ + ack_.slots <= seq || writes_->posted - writes_->done >= ack_.slots)
        if (auto ec = co_await await_reader())
          co_return ec;
      if (writes_->error)
        co_return writes_->error;
      if (auto ec = co_await cancelled())
        co_return ec;
      std::uint64_t offset = start + i * ack_.chunk_size;
      auto length =
          static_cast<std::size_t>(std::min<std::uint64_t>(ack_.chunk_size, size - offset));
      std::size_t local_slot = writes_->posted % ack_.slots;
      auto local = writes_->region.slice(local_slot * ack_.chunk_size, length);
      if (auto ec = read_fully(fd.get(), std::span<std::byte>(local.data, length), offset))
        co_return ec;
      crc = proto::crc32c(crc, std::span<const std::byte>(local.data, length));
      std::size_t remote_slot = seq % ack_.slots;
      auto remote = ack_.buffer.slice(std::uint64_t(remote_slot) * ack_.chunk_size, length);
      lengths_[remote_slot] = static_cast<std::uint32_t>(length);
      ++writes_->posted;
      ++posted_;
      deadline_.arm(); // its credit is awaited
      post_chunk(local, remote, static_cast<std::uint32_t>(seq), local_slot);
    }
    expected_answer a;
    a.file_id = file_id;
    a.size = size;
    a.chunks = posted_;
    if (auto ec = co_await expect(a))
      co_return ec;
    proto::file_end end;
    end.file_id = file_id;
    end.crc32c = crc;
    end.size = size;
    co_return co_await post_control(end);
  }

  /// Writes chunk `seq` into the receiver's slot: a write with immediate data, or on
  /// iWARP a write and then its chunk_written message (from `local_slot`'s notice).
  void post_chunk(const local_buffer& local, const remote_buffer& remote, std::uint32_t seq,
                  std::size_t local_slot) {
    auto done = [w = writes_](error_code ec, std::size_t) {
      w->note(ec);
      ++w->done;
      w->signal.cancel();
    };
    if (!notices_)
      return conn_.async_write_with_imm(local, remote, seq, std::move(done));
    conn_.async_write(local, remote, [w = writes_](error_code ec, std::size_t) { w->note(ec); });
    proto::chunk_written notice;
    notice.sequence = seq;
    notice.length = local.length;
    auto& bytes = writes_->notices[local_slot];
    proto::encode(notice, bytes);
    // RC places the write's bytes before the message arrives; the message's completion
    // follows the write's.
    conn_.async_send(asio::buffer(bytes), std::move(done));
  }

  static error_code read_fully(int fd, std::span<std::byte> into, std::uint64_t offset) {
    std::size_t got = 0;
    while (got < into.size()) {
      ssize_t n =
          ::pread(fd, into.data() + got, into.size() - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return from_errno();
      if (n == 0) // the file shrank while being sent
        return error_code(EIO, boost::system::system_category());
      got += static_cast<std::size_t>(n);
    }
    return {};
  }

  // --- the reader ---------------------------------------------------------

  /// Takes every message the receiver sends until the writer is done (it is
  /// then cancelled) or something fails. Its wait is bounded by the
  /// watchdog while anything is awaited.
  awaitable<error_code> read() {
    co_await asio::this_coro::throw_if_cancelled(false);
    for (;;) {
      proto::message m;
      auto ec = co_await receive(m, false);
      if (!ec)
        ec = take(m);
      if (ec)
        co_return ec;
      if (expected_count_ > 0 || credits_ < posted_)
        deadline_.arm();
      else
        deadline_.disarm();
      writes_->signal.cancel(); // the writer re-checks what it waits for
    }
  }

  /// Applies one (ok) message of the receiver; a protocol error for one
  /// that answers nothing the sender asked.
  error_code take(const proto::message& m) {
    if (auto* c = std::get_if<proto::credit>(&m)) {
      if (c->sequence != static_cast<std::uint32_t>(credits_) || credits_ >= posted_)
        return errc::protocol_error;
      credit(1);
      return {};
    }
    if (expected_count_ == 0)
      return errc::protocol_error;
    const expected_answer& a = expected_[expected_head_];
    if (auto* s = std::get_if<proto::status>(&m)) {
      // It credits what the entry's chunks left uncredited, no more.
      auto more = static_cast<std::uint32_t>(s->credited - static_cast<std::uint32_t>(credits_));
      if (a.kind != expected_answer::status || s->file_id != a.file_id ||
          credits_ + more != a.chunks)
        return errc::protocol_error;
      credit(more);
      result_.files += a.files;
      result_.bytes += a.size;
      if (a.batched_bytes > 0) {
        progress_.bytes_done += a.batched_bytes;
        result_.bytes_sent += a.batched_bytes;
        report_progress(false);
      }
    } else if (auto* p = std::get_if<proto::resume_point>(&m)) {
      if (a.kind != expected_answer::resume_point || p->file_id != a.file_id)
        return errc::protocol_error;
      resume_ = *p;
    } else {
      return errc::protocol_error;
    }
    expected_head_ = (expected_head_ + 1) % max_expected;
    --expected_count_;
    return {};
  }

  /// `n` more chunks are on the receiver's disk.
  void credit(std::uint64_t n) {
    for (; n > 0; --n, ++credits_) {
      std::uint64_t bytes = lengths_[credits_ % ack_.slots];
      progress_.bytes_done += bytes;
      result_.bytes_sent += bytes;
    }
    report_progress(false);
  }

  /// Calls on_progress if progress_interval passed since the last call (or
  /// `final`). A clock read per credit; the callback runs rarely.
  void report_progress(bool final) {
    if (!options_.on_progress)
      return;
    auto now = std::chrono::steady_clock::now();
    if (!final && now - last_progress_ < options_.progress_interval)
      return;
    last_progress_ = now;
    progress_.elapsed = now - started_;
    double s = std::chrono::duration<double>(progress_.elapsed).count();
    progress_.bytes_per_second =
        s > 0 ? static_cast<double>(progress_.bytes_done - progress_.bytes_resumed) / s : 0.0;
    options_.on_progress(progress_);
  }

  connection& conn_;
  file_transfer_options options_;
  deadline deadline_;
  std::shared_ptr<write_tracker> writes_;
  std::vector<std::uint64_t> listed_; ///< each entry's size when listed (0: directory)
  std::uint32_t offered_chunk_ = 0;
  std::uint16_t offered_depth_ = 0;
  proto::hello_ack ack_;
  // Chunks of the transfer (the writer posts, the reader credits).
  std::uint64_t posted_ = 0;
  std::uint64_t credits_ = 0;
  std::vector<std::uint32_t> lengths_; ///< of the chunk in each receiver slot
  bool notices_ = false; ///< chunks are told by chunk_written messages (iWARP)
  // Answers awaited, oldest first (a ring: nothing allocated per entry).
  std::array<expected_answer, max_expected> expected_{};
  std::size_t expected_head_ = 0;
  std::size_t expected_count_ = 0;
  std::optional<proto::resume_point> resume_; ///< taken by the writer
  /// Largest file_batch both sides take (0: none); set by the handshake.
  std::size_t batch_limit_ = 0;
  std::optional<proto::batch_builder> batch_; ///< being filled
  std::uint64_t batch_bytes_ = 0;             ///< data in batch_
  transfer_progress progress_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_progress_{};
  transfer_result result_;
  std::array<std::byte, 64> in_{};
  std::array<std::byte, proto::max_message_size> out_{};
};

using send_outcome = std::pair<error_code, transfer_result>;

awaitable<send_outcome> send_paths(connection& conn, std::filesystem::path path, bool tree,
                              file_transfer_options options) {
  // Cancellation is reported as an error_code, like every other failure.
  co_await asio::this_coro::throw_if_cancelled(false);
  auto start = std::chrono::steady_clock::now();
  send_outcome out;
  if ((out.first = options.validate()))
    co_return out;
  if (!conn.is_open()) {
    out.first = asio::error::not_connected;
    co_return out;
  }
  auto entries = list_send_entries(path, tree, out.first);
  if (out.first)
    co_return out;
  auto sender = std::make_unique<file_sender>(conn, options);
  try {
    out.first = co_await sender->run(entries);
  } catch (const boost::system::system_error& e) {
    out.first = e.code();
  }
  out.second = sender->result();
  out.second.elapsed = std::chrono::steady_clock::now() - start;
  if (out.first)
    conn.close(); // the stream cannot go on; the receiver drops the file (or keeps it: resume)
  co_return out;
}

} // namespace

void start_send_paths(connection& conn, std::filesystem::path path, bool tree,
                      const file_transfer_options& options, transfer_operation&& pending) {
  asio::any_io_executor ex = conn.get_executor();
  spawn_operation(ex, send_paths(conn, std::move(path), tree, options), std::move(pending),
                  [ex](transfer_operation& op, std::exception_ptr e, send_outcome out) {
                    if (e)
                      out.first = exception_error(e);
                    op.complete(ex, from::completion_path, out.first, out.second);
                  });
}

} // namespace asio_rdma::detail
