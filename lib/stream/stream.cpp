// asio_rdma::stream: a byte stream over a connection (docs/stream.md). Each side
// advertises a ring; a writer copies its bytes into its registered send buffer, RDMA-writes
// them into the peer's ring and tells the peer how many (a control word in the write's
// immediate data, or on iWARP a send after the write), or on SoftRoCE leaves every second
// post of a run for the peer to RDMA-read (a pull: the work of moving the bytes then
// splits between the two CPUs); the reader copies them out of its ring into the
// application's buffers and hands the room back as credit. A write
// completes once its bytes are copied in: the writer waits only when the send buffer or
// the peer's ring (its credit) is full. The connection hands the peer's messages to the
// stream as they arrive (connection_impl::listen), whether a read is pending or not, so a
// read that is cancelled loses nothing: the bytes stay in the ring.
#include "stream/stream_impl.hpp"

#include "internal_access.hpp"
#include "rc/connection_impl.hpp" // listen, has_immediate_data, waits_for_first_message
#include "throw_if.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace asio_rdma {

namespace asio = boost::asio;

namespace detail {

namespace wire = stream_wire;

void start_stream_read(stream_impl* impl, const buffer_view<asio::mutable_buffer>& buffers,
                       pending_operation<void(error_code, std::size_t)>&& op) {
  impl->read(buffers, std::move(op));
}
void start_stream_write(stream_impl* impl, const buffer_view<asio::const_buffer>& buffers,
                        pending_operation<void(error_code, std::size_t)>&& op) {
  impl->write(buffers, std::move(op));
}
void start_stream_shutdown(stream_impl* impl, pending_operation<void(error_code)>&& op) {
  impl->shutdown(std::move(op));
}
std::size_t stream_write_now(stream& s, const buffer_view<asio::const_buffer>& buffers) {
  return s.impl_ ? s.impl_->write_now(buffers) : 0;
}

// ---------------------------------------------------------------- continuations

/// The handler of one of the stream's sends or RDMA writes: runs `then` with the data
/// length it carried. Its memory is one of the stream's blocks.
struct stream_impl::sent {
  std::shared_ptr<stream_impl> self;
  handler_memory* memory;
  sent_action then;
  std::uint32_t length;

  sent(std::shared_ptr<stream_impl> s, handler_memory* m, sent_action t, std::uint32_t n) noexcept
      : self(std::move(s)), memory(m), then(t), length(n) {}
  sent(sent&&) noexcept = default;
  ~sent() { release_after_free(memory, self); }

  using allocator_type = handler_block_allocator<void, sizeof(handler_memory::bytes)>;
  allocator_type get_allocator() const noexcept { return allocator_type(memory); }

  void operator()(error_code ec, std::size_t) {
    auto s = std::move(self);
    ((*s).*then)(ec, length);
  }
};

/// A pending read, write or shutdown withdrawn by its caller's cancellation slot: it
/// completes with operation_aborted. Nothing is lost: a read's bytes stay in the ring, a
/// waiting write has copied nothing.
struct stream_impl::read_canceller {
  stream_impl* self;
  void operator()(asio::cancellation_type) const {
    self->read_op_.complete(self->io_, from::user_call, asio::error::operation_aborted, 0);
  }
};
struct stream_impl::write_canceller {
  stream_impl* self;
  void operator()(asio::cancellation_type) const {
    self->write_op_.complete(self->io_, from::user_call, asio::error::operation_aborted, 0);
    self->flush(); // a shutdown may have waited for this write
  }
};
struct stream_impl::shutdown_canceller {
  stream_impl* self;
  void operator()(asio::cancellation_type) const {
    self->end_wanted_ = false; // the end is not posted yet: writing may go on
    self->shutdown_op_.complete(self->io_, from::user_call, asio::error::operation_aborted);
  }
};

// The handler runs on the stream's executor: the connection calls it directly.
size_operation stream_impl::completion(handler_memory& memory, sent_action then,
                                       std::uint32_t length) {
  return size_operation(sent(shared_from_this(), &memory, then, length), io_);
}

// ---------------------------------------------------------------- opening and closing

stream_impl::stream_impl(connection&& established, const stream_options& options)
    : conn_(std::move(established)), conn_impl_(internal_access::impl(conn_)),
      io_(conn_.get_executor()), in_(options.ring_size), out_(options.send_buffer_size),
      post_size_(std::clamp<std::size_t>(options.send_buffer_size / max_posts, 4096, 64 * 1024)) {
  share_ = options.transfer == stream_transfer::shared ||
           (options.transfer == stream_transfer::automatic && conn_impl_->on_soft_roce());
}

stream_impl::~stream_impl() {
  // conn_impl_ is the connection this stream opened on, kept alive by it even if a caller
  // moved the connection out of underlying_connection() (which it documents not to do).
  conn_impl_->on_batch_end({});
  conn_impl_->listen({});
}

void stream_impl::open(error_code& ec) {
  immediate_ = conn_impl_->has_immediate_data();
  conn_impl_->on_batch_end({&stream_impl::batch_ended, this});
  ring_ = memory_region(conn_, in_.ring_size(), access::local_write | access::remote_write, ec);
  if (!ec)
    send_buffer_ = memory_region(conn_, out_.send_buffer_size(),
                                 share_ ? access::remote_read : access::none, ec);
  if (ec)
    return;
  send_lkey_ = send_buffer_.lkey();
  wire::advertisement mine;
  mine.address = reinterpret_cast<std::uintptr_t>(ring_.data().data());
  mine.rkey = ring_.rkey();
  mine.ring_size = static_cast<std::uint32_t>(in_.ring_size());
  if (share_) {
    mine.send_address = reinterpret_cast<std::uintptr_t>(send_buffer_.data().data());
    mine.send_rkey = send_buffer_.rkey();
    mine.send_size = static_cast<std::uint32_t>(out_.send_buffer_size());
  }
  advertisement_body_ = wire::encode(mine);
  // An iWARP acceptor may not send first: it advertises in answer to the peer's.
  advertise_later_ = conn_impl_->waits_for_first_message();
  if (!advertise_later_)
    send_advertisement();
  conn_impl_->listen({&stream_impl::message_arrived, this, control_});
}

void stream_impl::send_advertisement() {
  single_buffer<asio::const_buffer> body{asio::buffer(advertisement_body_)};
  start_send(conn_impl_.get(), body.view(), std::nullopt,
             completion(advertisement_memory_, &stream_impl::write_posted));
}

void stream_impl::close() noexcept {
  conn_.close();
  fail(asio::error::operation_aborted, from::user_call);
}

void stream_impl::fail(error_code ec, from origin) {
  // Done before the failure: their results stand. Posted, as the batch whose end would
  // run them may be cut short (closing stops the completion queue).
  complete_done(from::user_call);
  if (!read_end_)
    read_end_ = ec;
  if (!write_end_)
    write_end_ = ec;
  if (ec != asio::error::eof && ec != asio::error::operation_aborted && conn_.is_open())
    conn_.close(); // a protocol error: the peer sees the connection end
  if (read_op_ && in_.available() == 0)
    read_op_.complete(io_, origin, read_end_, 0);
  if (write_op_)
    write_op_.complete(io_, origin, write_end_, 0);
  if (shutdown_op_ && !end_posted_)
    shutdown_op_.complete(io_, origin, write_end_);
}

// ---------------------------------------------------------------- the peer's messages

void stream_impl::message_arrived(void* context, error_code ec, const received_message& message) {
  // What the message runs (the user's handlers) may drop the stream's last reference.
  const auto self = static_cast<stream_impl*>(context)->shared_from_this();
  self->on_received(ec, message);
}

void stream_impl::on_received(error_code ec, const received_message& message) {
  if (ec == asio::error::eof) {
    // The peer's connection ended: what it wrote before is still read. Not so bytes it
    // left to pull that have not landed: they are gone with it (an honest writer's end
    // waits for them), so the reader then ends with connection_reset, not eof.
    if (in_.pulls_in_flight() == 0)
      read_end_ = asio::error::eof;
    return fail(asio::error::connection_reset, from::completion_path);
  }
  if (ec == errc::buffer_too_small)
    ec = errc::protocol_error; // a message no stream sends
  if (!ec && !handle(message))
    ec = errc::protocol_error;
  if (ec)
    fail(ec, from::completion_path);
}

bool stream_impl::handle(const received_message& message) {
  using what = wire::message::what;
  const wire::message m =
      wire::parse(message.immediate, message.rdma_write, message.size, control_.data());
  if (m.type == what::advertisement)
    return take_advertisement(m.advertised);
  if (!peer_.ring_size)
    return false; // the advertisement comes first
  switch (m.type) {
  case what::data:
    if (end_received_ || !in_.arrived(m.value))
      return false;
    wake_reader();
    return true;
  case what::credit: // room in the peer's ring, or in the send buffer: write on
  case what::pulled:
    if (!(m.type == what::credit ? out_.credit(m.value) : out_.pulled(m.value)))
      return false;
    flush();
    wake_writer();
    return true;
  case what::end:
    if (end_received_)
      return false;
    end_received_ = true;
    end_reading_once_landed();
    wake_reader();
    return true;
  case what::pull:
    if (end_received_ || !in_.offered(m.value))
      return false;
    post_pull(m.value);
    return true;
  default:
    return false;
  }
}

bool stream_impl::take_advertisement(const wire::advertisement& ad) {
  if (peer_.ring_size)
    return false; // a second one
  peer_ = ad;
  out_.set_peer_ring(ad.ring_size);
  in_.set_peer_send_buffer(ad.send_size);
  peer_pulls_ = ad.version >= 2;
  if (std::exchange(advertise_later_, false))
    send_advertisement();
  wake_writer();
  return true;
}

// ---------------------------------------------------------------- reading

void stream_impl::read(const buffer_view<asio::mutable_buffer>& buffers,
                       pending_operation<void(error_code, std::size_t)>&& op) {
  // Only the first 16 buffers are read into (a read may always take fewer bytes).
  if (read_op_ || read_done_)
    return op.complete(io_, from::user_call, asio::error::already_started, 0);
  if (buffers.count == 0)
    return op.complete(io_, from::user_call, error_code(), 0);
  read_op_ = std::move(op);
  read_buffers_.assign(buffers);
  read_buffers_.too_many = false;
  if (in_.available() > 0 || read_end_)
    return complete_read(from::user_call);
  read_op_.on_cancel(read_canceller{this});
}

void stream_impl::wake_reader() {
  // Bytes written behind a pull still in flight are not readable yet.
  if (read_op_ && (in_.available() > 0 || read_end_))
    complete_read(from::completion_path);
}

void stream_impl::complete_read(from origin) {
  if (in_.available() == 0)
    return read_op_.complete(io_, origin, read_end_, 0);
  const std::size_t n = copy_out(read_buffers_.view());
  return_credit();
  if (origin == from::user_call)
    return complete_call(read_op_, read_done_, read_done_bytes_, n);
  read_op_.complete(io_, origin, error_code(), n);
}

std::size_t stream_impl::copy_out(const buffer_view<asio::mutable_buffer>& buffers) noexcept {
  std::size_t taken = 0;
  for (std::size_t i = 0; i < buffers.count && in_.available() > 0; ++i) {
    auto* dst = static_cast<std::byte*>(buffers.items[i].data());
    std::size_t room = buffers.items[i].size();
    while (room > 0 && in_.available() > 0) { // twice where the ring wraps
      const std::size_t n = std::min(room, in_.contiguous());
      std::memcpy(dst, ring_.data().data() + in_.read_offset(), n);
      in_.consumed(n);
      dst += n;
      room -= n;
      taken += n;
    }
  }
  return taken;
}

void stream_impl::return_credit() {
  if (credit_in_flight_ || write_end_)
    return;
  const std::size_t n = in_.credit_due();
  if (n == 0)
    return;
  in_.credit_sent(n);
  credit_in_flight_ = true;
  send_word(wire::word(wire::kind::credit, static_cast<std::uint32_t>(n)), credit_body_,
            credit_memory_, &stream_impl::credit_sent);
}

void stream_impl::credit_sent(error_code ec, std::uint32_t) {
  credit_in_flight_ = false;
  if (ec)
    return fail(ec, from::completion_path);
  return_credit(); // the reader may have read on meanwhile
}

void stream_impl::post_pull(std::size_t n) {
  const auto length = static_cast<std::uint32_t>(n);
  const local_buffer local = ring_.slice(in_.pull_target(n), n);
  work_request request;
  request.op = work_request::kind::read;
  request.local = list_view<local_buffer>{&local, 1};
  request.remote = remote_buffer{peer_.send_address + in_.pull_source(n), peer_.send_rkey, length};
  // At most max_pulls are in flight and they land in order: a block per pull (and one
  // for its `pulled`) in turn is free again when its turn comes.
  const std::size_t turn = pulls_started_++ % max_posts;
  start_work(conn_impl_.get(), request,
             completion(pull_memory_[2 * turn], &stream_impl::pull_landed, length));
}

void stream_impl::pull_landed(error_code ec, std::uint32_t length) {
  if (ec)
    return fail(ec, from::completion_path);
  if (read_end_)
    return; // the stream failed meanwhile (no end comes before its pulls land): not read
  in_.pull_landed();
  // The writer may use that part of its send buffer again.
  const std::size_t turn = (pulls_started_ - in_.pulls_in_flight() - 1) % max_posts;
  send_word(wire::word(wire::kind::pulled, length), pulled_bodies_[turn],
            pull_memory_[2 * turn + 1], &stream_impl::write_posted);
  end_reading_once_landed();
  wake_reader();
}

void stream_impl::end_reading_once_landed() {
  // The peer's end follows every byte it wrote: eof once the pulls before it have landed.
  if (end_received_ && in_.pulls_in_flight() == 0 && !read_end_)
    read_end_ = asio::error::eof;
}

// ---------------------------------------------------------------- writing

void stream_impl::write(const buffer_view<asio::const_buffer>& buffers,
                        pending_operation<void(error_code, std::size_t)>&& op) {
  if (end_wanted_ || end_posted_)
    return op.complete(io_, from::user_call, asio::error::shut_down, 0);
  if (write_end_)
    return op.complete(io_, from::user_call, write_end_, 0);
  if (write_op_ || write_done_)
    return op.complete(io_, from::user_call, asio::error::already_started, 0);
  if (buffers.total_size == 0 && !buffers.too_many)
    return op.complete(io_, from::user_call, error_code(), 0);
  if (out_.room() > 0) {
    const std::size_t n = copy_in(buffers);
    flush();
    return complete_call(op, write_done_, write_done_bytes_, n);
  }
  write_op_ = std::move(op);
  write_buffers_.assign(buffers);
  write_buffers_.too_many = false;
  write_op_.on_cancel(write_canceller{this});
}

std::size_t stream_impl::write_now(const buffer_view<asio::const_buffer>& buffers) {
  if (end_wanted_ || end_posted_ || write_end_ || write_op_ || write_done_ || out_.room() == 0)
    return 0;
  const std::size_t n = copy_in(buffers);
  flush();
  return n;
}

void stream_impl::wake_writer() {
  if (!write_op_ || out_.room() == 0)
    return;
  const std::size_t n = copy_in(write_buffers_.view());
  flush();
  write_op_.complete(io_, from::completion_path, error_code(), n);
}

void stream_impl::complete_call(size_op& op, size_op& done, std::size_t& done_bytes,
                                std::size_t n) {
  // Not once the stream has ended (its connection may be closing, and its batch cut
  // short), nor with the slot taken (a second operation the user started too early).
  if (done || read_end_ || write_end_ ||
      !(running_done_ || conn_impl_->completes_at_batch_end()))
    return op.complete(io_, from::user_call, error_code(), n);
  op.ignore_cancel(); // done: nothing left to withdraw
  done = std::move(op);
  done_bytes = n;
}

void stream_impl::batch_ended(void* context) {
  auto* self = static_cast<stream_impl*>(context);
  if (!self->read_done_ && !self->write_done_)
    return;
  // The handlers may release the stream (held until the loop ends) and start reads and
  // writes that complete at once: those are done too and run in turn, until none is
  // (each takes bytes: from the ring, or the send buffer's room, so the loop ends).
  const std::shared_ptr<stream_impl> keep = self->shared_from_this();
  struct running {
    bool& flag;
    explicit running(bool& f) : flag(f) { flag = true; }
    ~running() { flag = false; }
  } guard(self->running_done_);
  self->complete_done(from::completion_path);
}

void stream_impl::complete_done(from origin) {
  for (;;) { // a write before a read
    const bool write = static_cast<bool>(write_done_);
    if (!write && !read_done_)
      return;
    size_op op = std::move(write ? write_done_ : read_done_);
    op.complete(io_, origin, error_code(), write ? write_done_bytes_ : read_done_bytes_);
  }
}

std::size_t stream_impl::copy_in(const buffer_view<asio::const_buffer>& buffers) noexcept {
  // The buffers in order (at most 16 from a user's write), as much as there is room for
  // (a write may take fewer bytes).
  std::size_t taken = 0;
  for (std::size_t i = 0; i < buffers.count && out_.room() > 0; ++i) {
    const auto* src = static_cast<const std::byte*>(buffers.items[i].data());
    std::size_t left = buffers.items[i].size();
    while (left > 0 && out_.room() > 0) { // twice where the send buffer wraps
      const std::size_t offset = out_.copy_offset();
      const std::size_t n = std::min({left, out_.room(), send_buffer_.size() - offset});
      std::memcpy(send_buffer_.data().data() + offset, src, n);
      out_.copied(n);
      src += n;
      left -= n;
      taken += n;
    }
  }
  return taken;
}

void stream_impl::flush() {
  while (out_.in_flight() < max_posts && !write_end_) {
    const stream_writer_window::post p = out_.next_post(post_size_);
    if (p.length == 0)
      break;
    // While writes are in flight, what would be a small write of everything copied so far
    // waits to be coalesced with what comes next (a completion posts it): fewer, larger
    // RDMA writes. With nothing in flight it goes at once (a ping-pong waits for nothing).
    if (out_.in_flight() > 0 && p.length == out_.unposted() && p.length < post_size_)
      break;
    // In a run of writes every second post of a page or more is left for the peer to
    // pull (stream_transfer::shared); a lone write is written: it waits for nothing.
    const bool pull = out_.in_flight() > 0 && share_ && peer_pulls_ && !last_pulled_ &&
                      p.length >= min_pull;
    last_pulled_ = pull;
    out_.posted(p.length, pull ? stream_writer_window::by::pull : stream_writer_window::by::write);
    post_data(p, pull);
  }
  // The end goes once every byte is posted and every byte left to pull has been pulled:
  // RC then delivers it after the RDMA-written bytes, and a pull's bytes are already in
  // the peer's ring (were the end sent before, the shutdown could complete and close()
  // end the connection while the peer still reads them: they would be lost).
  if (end_wanted_ && !end_posted_ && !write_op_ && out_.all_posted() && !out_.pulls_pending() &&
      !write_end_) {
    end_posted_ = true;
    send_word(wire::word(wire::kind::end, 0), end_body_, end_memory_, &stream_impl::end_sent);
  }
}

void stream_impl::post_data(const stream_writer_window::post& p, bool pull) {
  const auto length = static_cast<std::uint32_t>(p.length);
  const std::size_t turn = posts_started_++ % max_posts;
  if (pull) // the peer reads these bytes; its `pulled` frees them (handle)
    return send_word(wire::word(wire::kind::pull, length), data_bodies_[turn],
                     post_memory_[2 * turn], &stream_impl::write_posted);
  // In bounds without a check: next_post cuts a post where the send buffer wraps.
  const local_buffer local{send_buffer_.data().data() + p.local_offset, length, send_lkey_, true};
  work_request request;
  request.op = work_request::kind::write;
  request.local = list_view<local_buffer>{&local, 1};
  request.remote = remote_buffer{peer_.address + p.remote_offset, peer_.rkey, p.length};
  // At most max_posts are in flight and they complete in order: a block per post (two on
  // iWARP) in turn is free again when its turn comes (a pull's `pulled` may overtake an
  // earlier write's completion: that block is then taken, and the handler's memory comes
  // from the heap, correct and only slower).
  if (immediate_) {
    request.immediate = wire::word(wire::kind::data, length);
    // A small write with no other in flight (a ping-pong's) goes inline and completes as
    // it is posted: its bytes are in the work request, so its part of the send buffer is
    // free at once, and no completion, handler or wake-up is spent on it.
    if (out_.in_flight() == 1 && conn_impl_->post_completed(request))
      return out_.write_completed();
    return start_work(conn_impl_.get(), request,
                      completion(post_memory_[2 * turn], &stream_impl::data_posted, length));
  }
  // iWARP: a send after the write tells the peer (RC places the write's bytes first).
  start_work(conn_impl_.get(), request,
             completion(post_memory_[2 * turn], &stream_impl::write_posted));
  send_word(wire::word(wire::kind::data, length), data_bodies_[turn], post_memory_[2 * turn + 1],
            &stream_impl::data_posted, length);
}

void stream_impl::data_posted(error_code ec, std::uint32_t) {
  if (ec)
    return fail(ec, from::completion_path);
  out_.write_completed();
  flush();
  wake_writer();
}

void stream_impl::write_posted(error_code ec, std::uint32_t) {
  if (ec)
    fail(ec, from::completion_path);
}

void stream_impl::send_word(std::uint32_t word, std::array<std::byte, wire::word_size>& body,
                            handler_memory& memory, sent_action then, std::uint32_t length) {
  if (immediate_)
    return start_send(conn_impl_.get(), buffer_view<asio::const_buffer>{}, word,
                      completion(memory, then, length));
  body = wire::encode_word(word);
  single_buffer<asio::const_buffer> view{asio::buffer(body)};
  start_send(conn_impl_.get(), view.view(), std::nullopt, completion(memory, then, length));
}

// ---------------------------------------------------------------- shutdown

void stream_impl::shutdown(pending_operation<void(error_code)>&& op) {
  if (end_wanted_ || end_posted_)
    return op.complete(io_, from::user_call, error_code()); // a second shutdown
  if (write_end_)
    return op.complete(io_, from::user_call, write_end_);
  end_wanted_ = true;
  shutdown_op_ = std::move(op);
  shutdown_op_.on_cancel(shutdown_canceller{this});
  flush();
}

void stream_impl::end_sent(error_code ec, std::uint32_t) {
  if (ec) {
    fail(ec, from::completion_path);
    // The stream's first failure says why: connection_reset when the peer went away
    // before it acknowledged the end (its disconnect can overtake the acknowledgement,
    // and the end is then flushed as aborted), operation_aborted after close().
    ec = write_end_;
  }
  if (shutdown_op_)
    shutdown_op_.complete(io_, from::completion_path, ec);
}

} // namespace detail

// ---------------------------------------------------------------- stream

stream::stream() noexcept = default;

stream::stream(connection&& established, const stream_options& options) {
  error_code ec;
  *this = stream(std::move(established), options, ec);
  detail::throw_if(ec, "asio_rdma::stream");
}

stream::stream(connection&& established, const stream_options& options, error_code& ec) {
  ec = {};
  if (!detail::internal_access::impl(established))
    return; // never open: so is the stream
  if (options.invalid()) {
    established.close(); // taken over all the same: the caller's connection ends here
    ec = errc::invalid_option;
    return;
  }
  auto impl = std::make_shared<detail::stream_impl>(std::move(established), options);
  impl->open(ec);
  if (ec) {
    impl->close();
    return;
  }
  impl_ = std::move(impl);
  ex_ = impl_->io();
}
stream::stream(stream&&) noexcept = default;
stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
    ex_ = std::move(other.ex_);
  }
  return *this;
}
stream::~stream() {
  close();
}

const connection& stream::underlying_connection() const noexcept {
  static const connection none;
  return impl_ ? impl_->conn() : none;
}
connection& stream::underlying_connection() noexcept {
  static connection none;
  return impl_ ? impl_->conn() : none;
}
bool stream::is_open() const noexcept {
  return impl_ && impl_->conn().is_open();
}
void stream::close() noexcept {
  if (impl_)
    impl_->close();
}

} // namespace asio_rdma
