// The receiving side of one connection (see receive_session.hpp and
// docs/file_transfer.md).
#include "receive_session.hpp"

#include "asio_alias.hpp"
#include "authentication.hpp"
#include "control.hpp"
#include "file_name.hpp"
#include "verbs/verbs_error.hpp"

#include <openssl/evp.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <string>

namespace asio_rdma::detail {

namespace proto = file_protocol;
using asio::awaitable;

namespace {
/// The key of a resumable file's kept temporary: the first 64 bits of the SHA-256
/// (libcrypto, as the authentication uses) of its name, its size and the sender's
/// address, in hex, so that only the same file from the same sender resumes it.
std::string resume_key(std::string_view name, std::uint64_t size, const asio::ip::address& peer) {
  std::string input(name);
  input.push_back('\0');
  input += std::to_string(size);
  input.push_back('\0');
  input += peer.to_string();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  ::EVP_Digest(input.data(), input.size(), digest, &length, ::EVP_sha256(), nullptr);
  char text[17];
  for (int i = 0; i < 8; ++i)
    std::snprintf(text + 2 * i, 3, "%02x", digest[i]);
  return std::string(text, 16);
}
} // namespace

receive_session::receive_session(file_receiver_impl& impl, connection& conn, receive_result& result,
                                 bool over_limit)
    : impl_(impl), conn_(conn), result_(result),
      deadline_(conn.get_executor(), conn, impl.options.transfer.timeout),
      buffer_size_(impl.options.transfer.buffer_size), credits_(std::make_shared<credit_ring>()),
      net_(conn.get_executor()),
      disk_(asio::make_strand(impl.options.disk_executor ? impl.options.disk_executor
                                                         : conn.get_executor())),
      drained_(conn.get_executor(), asio::steady_timer::time_point::max()),
      over_limit_(over_limit) {
  // Sized for the most slots this receiver offers, once: buffers of credits in
  // flight must not move.
  credits_->buffers.resize(std::size_t(impl.options.transfer.depth) * 2);
  credits_->busy.resize(credits_->buffers.size());
  credits_->owner = this;
  // Room for the largest file_batch this connection can receive, within reason.
  in_.resize(std::clamp(conn.options().max_message_size, proto::max_message_size, max_batch_size));
}

receive_session::~receive_session() {
  credits_->owner = nullptr;
  release_file_slot();
}

void receive_session::release_file_slot() noexcept {
  if (file_slot_) {
    file_slot_ = false;
    impl_.count(result_.peer.address(), &file_receiver_impl::peer_load::files, -1);
  }
}

awaitable<error_code> receive_session::run() {
  auto ec = co_await serve();
  // No job may outlive the session: they read its slots and its file.
  co_await drain();
  if (disk_error_ && ec != errc::no_space && ec != disk_error_)
    ec = disk_error_;
  // Lost in the middle of a resumable file (not refused: refuse() discarded
  // it): keep what arrived for the sender to resume.
  if (file_.is_open() && resumable_ && (received_ > 0 || offered_ > 0))
    file_.keep();
  co_return ec;
}

awaitable<error_code> receive_session::serve() {
  for (;;) {
    deadline_.arm();
    auto [ec, m] = co_await conn_.async_receive_message(
        asio::buffer(in_), asio::bind_cancellation_slot(wake_.slot(), as_awaitable_tuple));
    deadline_.disarm();
    if (ec == asio::error::eof && !file_.is_open())
      co_return error_code(); // the sender left between files: done
    if (disk_error_)          // a write failed; on_written woke us
      co_return co_await refuse_write(file_id_, disk_error_, "writing " + name_);
    if (ec)
      co_return wait_error(ec, deadline_); // an unfinished file is removed by file_
    if (m.rdma_write) {
      if (notices_ || !m.immediate)
        co_return co_await refuse(file_id_, proto::status_code::protocol_error,
                                  errc::protocol_error);
      if ((ec = co_await on_chunk(*m.immediate, m.size)))
        co_return ec;
      continue;
    }
    if (m.immediate)
      co_return co_await refuse(file_id_, proto::status_code::protocol_error, errc::protocol_error);
    std::span<const std::byte> bytes(in_.data(), m.size);
    auto message = proto::decode(bytes, ec);
    if (auto* hello = std::get_if<proto::hello>(&message))
      ec = co_await on_hello(*hello);
    else if (auto* begin = std::get_if<proto::file_begin>(&message))
      ec = co_await on_begin(*begin);
    else if (auto* end = std::get_if<proto::file_end>(&message))
      ec = co_await on_end(*end);
    else if (auto* batch = std::get_if<proto::file_batch>(&message))
      ec = co_await on_batch(*batch);
    else if (auto* from = std::get_if<proto::resume_from>(&message))
      ec = co_await on_resume_from(*from);
    else if (auto* chunk = std::get_if<proto::chunk_written>(&message); chunk && notices_)
      ec = co_await on_chunk(chunk->sequence, chunk->length);
    else
      ec = co_await refuse(file_id_, proto::status_code::protocol_error, errc::protocol_error);
    if (ec)
      co_return ec;
  }
}

awaitable<error_code> receive_session::on_hello(const proto::hello& m) {
  if (file_.is_open() || m.chunk_size == 0 || m.depth == 0)
    co_return co_await refuse(0, proto::status_code::protocol_error, errc::protocol_error);
  const auto& mine = impl_.options.transfer;
  if (over_limit_)
    co_return co_await refuse(0, proto::status_code::too_many_requests, errc::too_many_requests);
  if (!mine.secret.empty() && !authenticated_) {
    if (auto ec = co_await authenticate())
      co_return ec;
    authenticated_ = true;
  }
  std::uint32_t chunk =
      static_cast<std::uint32_t>(std::min<std::size_t>(m.chunk_size, buffer_size_));
  std::uint16_t slots = std::min(m.depth, mine.depth);
  std::size_t bytes = std::size_t(chunk) * slots;
  if (!slots_.is_registered() || slots_.size() != bytes) {
    slots_ = memory_region(); // deregister before registering anew
    error_code ec;
    slots_ = memory_region(conn_, bytes, access::local_write | access::remote_write, ec);
    if (ec)
      co_return co_await refuse(0, proto::status_code::io_error, ec);
  }
  ack_.chunk_size = chunk;
  ack_.slots = slots;
  notices_ = (m.flags & proto::hello_chunk_notices) != 0;
  // Chunks are counted over the transfer that this hello starts.
  next_sequence_ = 0;
  next_credit_ = 0;
  ack_.buffer = slots_.remote();
  ack_.batch_limit = static_cast<std::uint32_t>(in_.size());
  result_.chunk_size = chunk;
  proto::message reply_message = ack_;
  co_return co_await send_control(conn_, reply_message, out_);
}

awaitable<error_code> receive_session::authenticate() {
  error_code ec;
  proto::challenge challenge = make_challenge(ec);
  if (ec)
    co_return co_await refuse(0, proto::status_code::io_error, ec);
  proto::message m = challenge;
  if ((ec = co_await send_control(conn_, m, out_)))
    co_return ec;
  deadline_.arm();
  auto [rec, r] = co_await conn_.async_receive_message(asio::buffer(in_), as_awaitable_tuple);
  deadline_.disarm();
  // A sender without the secret gives up and disconnects.
  if (rec)
    co_return deadline_.expired() ? error_code(asio::error::timed_out)
                                  : error_code(errc::authentication_failed);
  if (r.rdma_write || r.immediate)
    co_return co_await refuse(0, proto::status_code::protocol_error, errc::protocol_error);
  m = proto::decode(std::span<const std::byte>(in_.data(), r.size), ec);
  auto* proof = std::get_if<proto::proof>(&m);
  if (!proof || !check_proof(impl_.options.transfer.secret, challenge, *proof))
    co_return co_await refuse(0, proto::status_code::authentication_failed,
                              errc::authentication_failed);
  co_return error_code();
}

awaitable<error_code> receive_session::on_begin(const proto::file_begin& m) {
  if (file_.is_open() || ack_.slots == 0)
    co_return co_await refuse(m.file_id, proto::status_code::protocol_error, errc::protocol_error);
  bool directory = false;
  std::uint64_t offset = 0;
  if (auto ec = co_await open_entry(m, directory, offset))
    co_return ec;
  if (directory)
    co_return co_await post_ok(m.file_id);
  // A file's begin is answered only when refused (or resumable): the sender
  // does not wait for it, and its data follows at once.
  if (!(m.flags & proto::flag_resume))
    co_return error_code();
  co_return co_await offer_resume(m.file_id, offset);
}

awaitable<error_code> receive_session::on_batch(const proto::file_batch& m) {
  if (file_.is_open() || ack_.slots == 0 || awaiting_resume_)
    co_return co_await refuse(m.first_file_id, proto::status_code::protocol_error,
                              errc::protocol_error);
  batch_.emplace();
  auto ec = co_await store_batch(m);
  // What was stored before a failure is reported too (if durable).
  if (auto sync_ec = sync_batch(); sync_ec && !ec) {
    auto last = m.first_file_id + m.count - 1;
    ec = co_await refuse_write(last, sync_ec, "storing a batch: fsync the directory",
                               proto::status_code::store_failed);
  }
  batch_.reset();
  if (ec)
    co_return ec;
  // One status for the batch: every record is stored.
  co_return co_await post_ok(m.first_file_id + m.count - 1);
}

awaitable<error_code> receive_session::store_batch(const proto::file_batch& m) {
  auto rest = m.records;
  proto::batch_record record;
  for (std::uint16_t i = 0; i < m.count; ++i) {
    proto::take_record(rest, m.first_file_id + i, record); // whole: decode() checked them
    bool directory = false;
    std::uint64_t offset = 0;
    if (auto ec = co_await open_entry(record.entry, directory, offset))
      co_return ec;
    if (directory)
      continue;
    // The whole file is here: written at once, on this executor (it is small).
    crc_ = proto::crc32c(0, record.data);
    if (!record.data.empty()) {
      error_code ec;
      file_.write_at(record.data, 0, ec);
      if (ec)
        co_return co_await refuse_write(file_id_, ec, "writing " + name_);
    }
    received_ = record.data.size();
    if (auto ec = co_await store({record.entry.file_id, record.crc32c, record.entry.size}))
      co_return ec;
  }
  co_return error_code();
}

awaitable<error_code> receive_session::open_entry(const proto::file_begin& m, bool& directory,
                                                  std::uint64_t& offset) {
  error_code ec;
  auto components = split_relative_name(m.name, ec);
  if (ec)
    co_return co_await refuse(m.file_id, proto::status_code::bad_name, errc::protocol_error);
  received_file f;
  f.name = std::string(m.name);
  f.path = impl_.directory / f.name;
  f.mode = m.mode & 0777;
  if (m.kind == proto::entry_kind::directory) {
    auto dir = open_directories(impl_.directory_fd.get(), components, ec);
    if (!ec && ::fchmod(dir.get(), f.mode | 0700) != 0)
      ec = from_errno();
    if (ec)
      co_return co_await refuse_io(m.file_id, ec, "creating the directory " + f.name);
    f.directory = true;
    completed(std::move(f));
    directory = true;
    co_return error_code();
  }
  const auto& options = impl_.options;
  if (m.size > options.max_file_size)
    co_return co_await refuse(m.file_id, proto::status_code::too_large, errc::file_too_large);
  const auto peer = result_.peer.address();
  auto in_flight = impl_.peers[peer].files;
  if (options.max_files_in_flight_per_peer != 0 &&
      in_flight >= options.max_files_in_flight_per_peer)
    co_return co_await refuse(m.file_id, proto::status_code::too_many_requests,
                              errc::too_many_requests);
  impl_.count(peer, &file_receiver_impl::peer_load::files, +1);
  file_slot_ = true;
  file_ = open_file(m, components, offset, ec);
  if (ec) {
    file_.discard();
    co_return co_await refuse_io(m.file_id, ec, "creating a temporary for " + f.name);
  }
  // Refused early (before any data) when the name is taken; commit checks
  // again, atomically, for a file that appeared meanwhile. (A batch's file
  // is here already: commit's check is enough.)
  if (options.overwrite == overwrite_policy::refuse && !batch_ && file_.target_exists())
    co_return co_await refuse(m.file_id, proto::status_code::file_exists, errc::file_exists);
  // In a batch, the free space was read once with the directory.
  std::uint64_t free = batch_ ? batch_->free : file_.free_space(ec);
  if (ec)
    co_return co_await refuse_io(m.file_id, ec, "reading the free space for " + f.name);
  if (offset > m.size) { // not this file's prefix after all
    file_.truncate(0, ec);
    if (ec)
      co_return co_await refuse_io(m.file_id, ec, "emptying the kept file of " + f.name);
    offset = 0;
  }
  if (m.size - offset > free)
    co_return co_await refuse(m.file_id, proto::status_code::no_space, errc::no_space);
  if (batch_)
    batch_->free -= m.size;
  name_ = std::move(f.name);
  file_id_ = m.file_id;
  mode_ = f.mode;
  size_ = m.size;
  received_ = 0;
  offered_ = 0;
  offered_crc_ = 0;
  crc_ = 0;
  write_inline_ = m.size <= inline_write_limit;
  // No job is pending between files (on_end and refuse drained them).
  disk_error_ = {};
  disk_failed_ = false;
  co_return error_code();
}

awaitable<error_code> receive_session::offer_resume(std::uint32_t file_id, std::uint64_t offset) {
  // Offer what is kept; the sender compares it with its file and answers
  // with resume_from before any data.
  error_code ec;
  proto::resume_point point;
  point.file_id = file_id;
  point.offset = offset;
  point.crc32c = offset ? file_.prefix_crc(offset, ec) : 0;
  if (ec)
    co_return co_await refuse_io(file_id, ec, "reading the kept file of " + name_);
  offered_ = point.offset;
  offered_crc_ = point.crc32c;
  awaiting_resume_ = true;
  proto::message reply_message = point;
  co_return co_await send_control(conn_, reply_message, out_);
}

partial_file receive_session::open_file(const proto::file_begin& m,
                                        std::span<const std::string> components,
                                        std::uint64_t& offset, error_code& ec) {
  offset = 0;
  resumable_ = false;
  const auto max_age = impl_.options.resume_max_age;
  if ((m.flags & proto::flag_resume) && max_age.count() > 0) {
    bool busy = false;
    auto f = partial_file::open_resumable(impl_.directory_fd.get(), components,
                                          resume_key(m.name, m.size, result_.peer.address()),
                                          max_age, offset, busy, ec);
    if (ec || !busy) {
      resumable_ = !ec;
      return f;
    }
    // Another transfer of this file holds the kept one: this one is not
    // resumable and starts from nothing.
  }
  if (batch_)
    return partial_file::create_in(batch_directory(components.first(components.size() - 1), ec),
                                   components.back(), ec);
  return partial_file::create(impl_.directory_fd.get(), components, ec);
}

shared_directory receive_session::batch_directory(std::span<const std::string> parent,
                                                  error_code& ec) {
  auto& b = *batch_;
  if (b.directory && std::equal(parent.begin(), parent.end(), b.parent.begin(), b.parent.end()))
    return b.directory;
  // Another directory: the files stored in the last one become durable and
  // are reported first.
  if ((ec = sync_batch()))
    return {};
  b.directory =
      std::make_shared<const unique_fd>(open_directories(impl_.directory_fd.get(), parent, ec));
  if (!ec)
    b.free = free_space(b.directory->get(), ec);
  if (ec) {
    b.directory.reset();
    return {};
  }
  b.parent.assign(parent.begin(), parent.end());
  return b.directory;
}

error_code receive_session::sync_batch() {
  auto& b = *batch_;
  if (!b.stored.empty() && impl_.options.fsync && ::fsync(b.directory->get()) != 0)
    return from_errno();
  for (auto& f : b.stored)
    completed(std::move(f));
  b.stored.clear();
  return {};
}

awaitable<error_code> receive_session::on_resume_from(const proto::resume_from& m) {
  if (!awaiting_resume_ || m.file_id != file_id_ || (m.offset != 0 && m.offset != offered_))
    co_return co_await refuse(m.file_id, proto::status_code::protocol_error, errc::protocol_error);
  awaiting_resume_ = false;
  if (m.offset == 0 && offered_ > 0) { // the sender's file differs: start over
    error_code ec;
    file_.truncate(0, ec);
    if (ec)
      co_return co_await refuse_io(m.file_id, ec, "emptying the kept file of " + name_);
  }
  received_ = m.offset;
  crc_ = m.offset ? offered_crc_ : 0;
  co_return error_code();
}

void receive_session::submit(std::span<const std::byte> data, std::uint64_t offset) {
  ++submitted_;
  if (write_inline_) {
    // A small file: its write costs less than the two thread hand-overs of
    // the disk strand (no job of it or of an earlier file is pending there).
    error_code ec;
    crc_ = proto::crc32c(crc_, data);
    file_.write_at(data, offset, ec);
    return on_written(ec);
  }
  asio::post(disk_, [this, data, offset] {
    // On the disk strand: chunks of this connection one after the other, so
    // the running CRC-32C and the file see them in order.
    error_code ec;
    if (!disk_failed_) {
      crc_ = proto::crc32c(crc_, data);
      file_.write_at(data, offset, ec);
      disk_failed_ = ec.failed();
    } else {
      ec = asio::error::operation_aborted; // the first failure is reported
    }
    asio::post(net_, [this, ec] { on_written(ec); });
  });
}

void receive_session::on_written(error_code ec) {
  ++written_;
  if (ec && !disk_error_) {
    disk_error_ = ec;
    wake_.emit(asio::cancellation_type::terminal);
  } else if (!ec && !disk_error_) {
    ++credits_due_;
    pump_credits();
  }
  drained_.cancel();
}

bool receive_session::credit_sendable() const noexcept {
  return credits_due_ > 0 && !(holding_ && next_credit_ == held_sequence_);
}

void receive_session::pump_credits() {
  auto& ring = *credits_;
  // A buffer is reused only once the send that used it completed (almost
  // always long before: the ring holds twice the chunks in flight); a send
  // that completes calls this again.
  while (credit_sendable() && !ring.error) {
    std::size_t index = next_credit_buffer_ % ring.buffers.size();
    if (ring.busy[index])
      break;
    proto::credit c;
    c.sequence = next_credit_++;
    --credits_due_;
    send_from_ring(index, c);
  }
}

awaitable<void> receive_session::drain() {
  // Disk writes end by themselves (no deadline: their jobs cannot be
  // abandoned while they read the slots); credits end when the connection
  // does, or its send fails.
  while (written_ != submitted_ || (credit_sendable() && !credits_->error && conn_.is_open()))
    co_await drained_.async_wait(as_awaitable_tuple);
}

awaitable<error_code> receive_session::on_chunk(std::uint32_t sequence, std::size_t size) {
  if (!file_.is_open() || awaiting_resume_ || sequence != next_sequence_ ||
      size != std::min<std::uint64_t>(ack_.chunk_size, size_ - received_))
    co_return co_await refuse(file_id_, proto::status_code::protocol_error, errc::protocol_error);
  if (disk_error_)
    co_return co_await refuse_write(file_id_, disk_error_, "writing " + name_);
  std::size_t slot = next_sequence_ % ack_.slots;
  if (received_ + size == size_) {
    // The file's last chunk: its credit goes with the file's status.
    holding_ = true;
    held_sequence_ = next_sequence_;
  }
  submit(slots_.data().subspan(slot * ack_.chunk_size, size), received_);
  received_ += size;
  ++next_sequence_;
  if (disk_error_) // an inline write failed (submit wrote it)
    co_return co_await refuse_write(file_id_, disk_error_, "writing " + name_);
  co_return error_code();
}

awaitable<error_code> receive_session::on_end(const proto::file_end& m) {
  if (!file_.is_open() || awaiting_resume_ || m.file_id != file_id_)
    co_return co_await refuse(m.file_id, proto::status_code::protocol_error, errc::protocol_error);
  // Every chunk on disk and its credit posted (the credits go before the
  // status, in order) before the verdict.
  co_await drain();
  if (disk_error_)
    co_return co_await refuse_write(m.file_id, disk_error_, "writing " + name_);
  if (credits_->error)
    co_return credits_->error;
  if (auto ec = co_await store(m))
    co_return ec;
  co_return co_await post_ok(m.file_id);
}

awaitable<error_code> receive_session::store(const proto::file_end& m) {
  if (m.size != size_ || received_ != size_)
    co_return co_await refuse(m.file_id, proto::status_code::size_mismatch, errc::protocol_error);
  if (m.crc32c != crc_)
    co_return co_await refuse(m.file_id, proto::status_code::checksum_mismatch,
                              errc::protocol_error);
  error_code ec;
  std::string stored;
  // A batch's directory is fsynced once, after its files (sync_batch()).
  file_.commit(mode_, impl_.options.fsync, impl_.options.overwrite, impl_.commit_method, stored, ec,
               !batch_);
  release_file_slot();
  if (ec)
    co_return co_await refuse_write(m.file_id, ec, "storing " + name_ + ": " + file_.failed_step(),
                                    proto::status_code::store_failed);
  received_file f;
  // The stored name differs from the sent one only in its last component
  // (overwrite_policy::keep_both).
  f.path = (impl_.directory / name_).parent_path() / stored;
  f.name = std::move(name_);
  f.durable = impl_.options.fsync;
  f.size = size_;
  f.mode = mode_;
  result_.bytes += size_;
  if (batch_)
    batch_->stored.push_back(std::move(f)); // reported once its directory entry is durable
  else
    completed(std::move(f));
  co_return error_code();
}

proto::status receive_session::make_status(std::uint32_t file_id, proto::status_code code) {
  proto::status s;
  s.file_id = file_id;
  s.code = code;
  // Every chunk written and not yet credited is credited by this status.
  next_credit_ += credits_due_;
  credits_due_ = 0;
  holding_ = false;
  s.credited = next_credit_;
  return s;
}

awaitable<error_code> receive_session::reply(std::uint32_t file_id, proto::status_code code) {
  proto::message m = make_status(file_id, code);
  co_return co_await send_control(conn_, m, out_);
}

awaitable<error_code> receive_session::post_ok(std::uint32_t file_id) {
  auto& ring = *credits_;
  std::size_t index = next_credit_buffer_ % ring.buffers.size();
  if (ring.busy[index]) { // a send completing cancels drained_
    deadline_.arm(); // a sender that stops taking messages is given up on
    while (ring.busy[index] && !ring.error)
      co_await drained_.async_wait(as_awaitable_tuple);
    deadline_.disarm();
  }
  if (ring.error)
    co_return wait_error(ring.error, deadline_);
  send_from_ring(index, make_status(file_id, proto::status_code::ok));
  co_return error_code();
}

void receive_session::send_from_ring(std::size_t index, const proto::message& m) {
  auto& ring = *credits_;
  std::size_t n = proto::encode(m, ring.buffers[index]);
  ring.busy[index] = 1;
  ++next_credit_buffer_;
  conn_.async_send(asio::buffer(ring.buffers[index].data(), n),
                   [r = credits_, index](error_code ec, std::size_t) {
                     if (ec && !r->error)
                       r->error = ec;
                     r->busy[index] = 0;
                     if (r->owner) {
                       r->owner->pump_credits();
                       r->owner->drained_.cancel();
                     }
                   });
}

awaitable<error_code> receive_session::refuse(std::uint32_t file_id, proto::status_code code,
                                              error_code ec) {
  co_await drain(); // no write may still use the file
  file_.discard();
  release_file_slot();
  co_await reply(file_id, code); // best effort: the session ends with `ec` anyway
  co_return ec;
}

awaitable<error_code> receive_session::refuse_write(std::uint32_t file_id, error_code ec,
                                                    std::string_view doing,
                                                    proto::status_code otherwise) {
  if (ec == errc::file_exists)
    co_return co_await refuse(file_id, proto::status_code::file_exists, ec);
  result_.failure = std::string(doing) + ": " + ec.message();
  if (ec == boost::system::errc::no_space_on_device ||
      ec == error_code(EDQUOT, boost::system::system_category()))
    co_return co_await refuse(file_id, proto::status_code::no_space, errc::no_space);
  co_return co_await refuse(file_id, otherwise, ec);
}

awaitable<error_code> receive_session::refuse_io(std::uint32_t file_id, error_code ec,
                                                 std::string_view doing) {
  result_.failure = std::string(doing) + ": " + ec.message();
  co_return co_await refuse(file_id, proto::status_code::io_error, ec);
}

void receive_session::completed(received_file f) {
  result_.files.push_back(std::move(f));
  if (impl_.options.on_file)
    impl_.options.on_file(result_.files.back());
}

} // namespace asio_rdma::detail
