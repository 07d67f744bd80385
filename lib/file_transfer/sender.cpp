// The sending side of the file transfer: handshake, then per entry
// file_begin / data chunks (RDMA write with immediate) / file_end, each
// confirmed by the receiver. See docs/file_transfer.md.
#include "authentication.hpp"
#include "control.hpp"
#include "deadline.hpp"
#include "partial_file.hpp"
#include "send_entries.hpp"
#include "spawn_completion.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/file_transfer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace asio_rdma::detail {

namespace asio = boost::asio;
namespace proto = file_protocol;
using asio::awaitable;

namespace {

constexpr auto as_awaitable_tuple = asio::as_tuple(asio::use_awaitable);

/// State the completion handlers of posted RDMA writes share with the
/// sender; it (and the registered memory the writes read) lives until the
/// last of them ran, even if the operation ended before.
struct write_tracker {
  explicit write_tracker(const asio::any_io_executor& ex)
      : signal(ex, asio::steady_timer::time_point::max()) {}
  memory_region region;
  asio::steady_timer signal; // cancelled whenever a write completes
  std::uint64_t posted = 0;
  std::uint64_t done = 0;
  error_code error;
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

class file_sender {
public:
  file_sender(connection& conn, const file_transfer_options& options)
      : conn_(conn), options_(options), deadline_(conn.get_executor(), conn, options.timeout),
        writes_(std::make_shared<write_tracker>(conn.get_executor())) {}

  awaitable<error_code> run(const std::vector<send_entry>& entries) {
    started_ = std::chrono::steady_clock::now();
    for (const auto& e : entries) {
      std::error_code sec;
      if (!e.directory)
        progress_.bytes_total += std::filesystem::file_size(e.local, sec);
    }
    if (auto ec = co_await handshake())
      co_return ec;
    std::uint32_t file_id = 0;
    for (const auto& e : entries) {
      auto ec = e.directory ? co_await send_directory(e, file_id) : co_await send_file(e, file_id);
      if (ec)
        co_return ec;
      ++file_id;
    }
    report_progress(true);
    co_return error_code();
  }

  transfer_result& result() noexcept { return result_; }

private:
  /// operation_aborted once the operation was cancelled (a cancellation
  /// signalled between waits reaches no operation, so it is checked here).
  static awaitable<error_code> cancelled() {
    auto cs = co_await asio::this_coro::cancellation_state;
    co_return cs.cancelled() != asio::cancellation_type::none
        ? error_code(asio::error::operation_aborted)
        : error_code();
  }

  /// Receives the next control message into in_ (bounded by the timeout).
  awaitable<error_code> receive(proto::message& out) {
    if (auto ec = co_await cancelled())
      co_return ec;
    deadline_.arm();
    auto [ec, m] = co_await conn_.async_receive_message(asio::buffer(in_), as_awaitable_tuple);
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

  awaitable<error_code> handshake() {
    proto::hello hello;
    hello.chunk_size = static_cast<std::uint32_t>(options_.buffer_size);
    hello.depth = options_.depth;
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
    if (!ack || ack->chunk_size == 0 || ack->chunk_size > options_.buffer_size || ack->slots == 0 ||
        ack->slots > options_.depth ||
        ack->buffer.length < std::uint64_t(ack->chunk_size) * ack->slots)
      co_return error_code(errc::protocol_error);
    ack_ = *ack;
    result_.chunk_size = ack_.chunk_size;
    error_code ec;
    writes_->region =
        memory_region(conn_, std::size_t(ack_.chunk_size) * ack_.slots, access::local_write, ec);
    co_return ec;
  }

  /// Sends a file_begin and awaits the receiver's verdict on the name: a
  /// status, or with `point` (a resumable file) the receiver's resume_point.
  awaitable<error_code> begin(const send_entry& e, std::uint32_t file_id, std::uint32_t mode,
                              std::uint64_t size, proto::resume_point* point = nullptr) {
    proto::file_begin b;
    b.file_id = file_id;
    b.kind = e.directory ? proto::entry_kind::directory : proto::entry_kind::file;
    b.mode = mode;
    b.size = size;
    b.name = e.name;
    b.flags = point ? proto::flag_resume : 0;
    proto::message m = b;
    if (auto ec = co_await send_control(conn_, m, out_))
      co_return ec;
    if (!point)
      co_return co_await expect_status(file_id);
    if (auto ec = co_await receive(m))
      co_return ec;
    auto* p = std::get_if<proto::resume_point>(&m);
    if (!p || p->file_id != file_id || p->offset > size)
      co_return error_code(errc::protocol_error);
    *point = *p;
    co_return error_code();
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

  awaitable<error_code> expect_status(std::uint32_t file_id) {
    proto::message m;
    if (auto ec = co_await receive(m))
      co_return ec;
    auto* s = std::get_if<proto::status>(&m);
    if (!s || s->file_id != file_id)
      co_return error_code(errc::protocol_error);
    co_return error_code();
  }

  awaitable<error_code> send_directory(const send_entry& e, std::uint32_t file_id) {
    std::error_code sec;
    auto perms = std::filesystem::status(e.local, sec).permissions();
    if (sec)
      co_return error_code(sec.value(), boost::system::system_category());
    if (auto ec = co_await begin(e, file_id, static_cast<std::uint32_t>(perms) & 07777, 0))
      co_return ec;
    ++result_.files;
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
    std::error_code sec;
    auto listed = std::filesystem::file_size(e.local, sec);
    if (!sec && listed != size)
      progress_.bytes_total = progress_.bytes_total - listed + size;
    size_ = size;
    if ((size + ack_.chunk_size - 1) / ack_.chunk_size > std::numeric_limits<std::uint32_t>::max())
      co_return error_code(EFBIG, boost::system::system_category());
    std::uint64_t start = 0; // the data sent begins here (> 0 when resumed)
    std::uint32_t crc = 0;   // of the whole file up to where the data is
    if (options_.resume) {
      proto::resume_point point;
      if (auto ec = co_await begin(e, file_id, st.st_mode & 07777, size, &point))
        co_return ec;
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
      proto::message m = from;
      if (auto ec = co_await send_control(conn_, m, out_))
        co_return ec;
      progress_.bytes_done += start;
      progress_.bytes_resumed += start;
      result_.bytes_resumed += start;
    } else if (auto ec = co_await begin(e, file_id, st.st_mode & 07777, size)) {
      co_return ec;
    }
    start_ = start;
    std::uint64_t chunks = (size - start + ack_.chunk_size - 1) / ack_.chunk_size;

    credits_ = 0;
    for (std::uint64_t seq = 0; seq < chunks; ++seq) {
      // The receiver's slot for this chunk must have been handed back...
      while (credits_ + ack_.slots <= seq)
        if (auto ec = co_await await_credit(chunks))
          co_return ec;
      // ...and our own buffer's previous write must have completed.
      if (auto ec = co_await await_local_buffer())
        co_return ec;
      if (auto ec = co_await cancelled())
        co_return ec;
      std::uint64_t offset = start + seq * ack_.chunk_size;
      auto length =
          static_cast<std::size_t>(std::min<std::uint64_t>(ack_.chunk_size, size - offset));
      std::size_t local_slot = writes_->posted % ack_.slots;
      auto local = writes_->region.slice(local_slot * ack_.chunk_size, length);
      if (auto ec = read_fully(fd.get(), local, offset))
        co_return ec;
      crc = proto::crc32c(crc, std::span<const std::byte>(local.data, length));
      std::size_t remote_slot = seq % ack_.slots;
      auto remote = ack_.buffer.slice(std::uint64_t(remote_slot) * ack_.chunk_size, length);
      ++writes_->posted;
      conn_.async_write_with_imm(local, remote, static_cast<std::uint32_t>(seq),
                                 [w = writes_](error_code ec, std::size_t) {
                                   if (ec && !w->error)
                                     w->error = ec;
                                   ++w->done;
                                   w->signal.cancel();
                                 });
    }
    proto::file_end end;
    end.file_id = file_id;
    end.crc32c = crc;
    end.size = size;
    proto::message m = end;
    if (auto ec = co_await send_control(conn_, m, out_))
      co_return ec;
    // Credits for the last chunks come before the verdict.
    while (credits_ < chunks)
      if (auto ec = co_await await_credit(chunks))
        co_return ec;
    if (auto ec = co_await expect_status(file_id))
      co_return ec;
    ++result_.files;
    result_.bytes += size;
    co_return error_code();
  }

  awaitable<error_code> await_credit(std::uint64_t chunks) {
    proto::message m;
    if (auto ec = co_await receive(m))
      co_return ec;
    auto* c = std::get_if<proto::credit>(&m);
    if (!c || c->sequence != credits_ || credits_ >= chunks)
      co_return error_code(errc::protocol_error);
    auto bytes =
        std::min<std::uint64_t>(ack_.chunk_size, size_ - start_ - credits_ * ack_.chunk_size);
    progress_.bytes_done += bytes;
    result_.bytes_sent += bytes;
    ++credits_;
    report_progress(false);
    co_return error_code();
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

  awaitable<error_code> await_local_buffer() {
    while (writes_->posted - writes_->done >= ack_.slots && !writes_->error) {
      deadline_.arm();
      co_await writes_->signal.async_wait(as_awaitable_tuple);
      deadline_.disarm();
      if (auto ec = co_await cancelled())
        co_return ec;
      if (deadline_.expired())
        co_return error_code(asio::error::timed_out);
    }
    co_return writes_->error;
  }

  static error_code read_fully(int fd, const local_buffer& into, std::uint64_t offset) {
    std::size_t got = 0;
    while (got < into.length) {
      ssize_t n = ::pread(fd, into.data + got, into.length - got, static_cast<off_t>(offset + got));
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

  connection& conn_;
  file_transfer_options options_;
  deadline deadline_;
  std::shared_ptr<write_tracker> writes_;
  proto::hello_ack ack_;
  std::uint64_t credits_ = 0;
  std::uint64_t size_ = 0;  ///< of the file being sent
  std::uint64_t start_ = 0; ///< where its data begins (the resumed prefix's length)
  transfer_progress progress_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_progress_{};
  transfer_result result_;
  std::array<std::byte, 64> in_{};
  std::array<std::byte, proto::max_message_size> out_{};
};

using outcome = std::pair<error_code, transfer_result>;

awaitable<outcome> send_paths(connection& conn, std::filesystem::path path, bool tree,
                              file_transfer_options options) {
  // Cancellation is reported as an error_code, like every other failure.
  co_await asio::this_coro::throw_if_cancelled(false);
  auto start = std::chrono::steady_clock::now();
  outcome out;
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
                      const file_transfer_options& options, transfer_handler handler) {
  asio::any_io_executor ex = conn.get_executor();
  auto completion =
      spawn_completion(ex, handler, [](transfer_handler h, std::exception_ptr e, outcome out) {
        if (e)
          out.first = exception_error(e);
        std::move(h)(out.first, out.second);
      });
  asio::co_spawn(ex, send_paths(conn, std::move(path), tree, options), std::move(completion));
}

} // namespace asio_rdma::detail
