#include "rpc/client_connection.hpp"

#include <asio_rdma/stream.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <exception>
#include <limits>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using boost::system::error_code;

namespace {
error_code error_of_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& x) {
    return x.code();
  } catch (const std::bad_alloc&) {
    return make_error_code(boost::system::errc::not_enough_memory);
  } catch (...) {
    return make_error_code(errc::protocol_error);
  }
}
} // namespace

client_connection::client_connection(const asio::any_io_executor& ex,
                                     const client_options& options, observer* watcher)
    : ex_(ex), options_(options), watcher_(watcher), connect_timer_(ex), deadlines_(ex) {}

void client_connection::establish(const endpoint& ep) { start(connect_and_hello(ep)); }
void client_connection::establish(asio_rdma::stream s) { start(hello_and_take(std::move(s))); }
void client_connection::establish(asio::ip::tcp::socket s) { start(hello_and_take(std::move(s))); }

// Runs `how` (connect, hello) within the connect timeout, then serves calls.
void client_connection::start(asio::awaitable<void> how) {
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (!ec && !self->up_ && !self->failed())
      self->connect_cancel_.emit(asio::cancellation_type::terminal);
  });
  asio::co_spawn(ex_, std::move(how),
                 asio::bind_cancellation_slot(
                     connect_cancel_.slot(), [self = shared_from_this()](std::exception_ptr e) {
                       self->connect_timer_.cancel();
                       if (self->failed())
                         return; // closed meanwhile
                       if (!e)
                         return self->established();
                       error_code ec = error_of_exception(e);
                       if (ec == asio::error::operation_aborted)
                         ec = asio::error::timed_out; // only the connect timer cancels it
                       self->fail(ec, from::completion_path);
                     }));
}

template <typename Stream> asio::awaitable<void> client_connection::hello_and_take(Stream s) {
  co_await hello(s);
  transport_ = make_transport(std::move(s));
}

template <typename Stream> asio::awaitable<void> client_connection::hello(Stream& s) {
  wire::header_bytes out;
  // The client's largest reply goes where a call's id would.
  // Its features: over RDMA it reads bulk replies.
  constexpr bool rdma = std::is_same_v<Stream, asio_rdma::stream>;
  wire::frame_header mine{wire::frame_kind::hello, 0, options_.max_response_size, wire::version,
                          rdma ? wire::feature_bulk : 0};
  wire::encode(mine, out);
  co_await asio::async_write(s, asio::buffer(out), asio::use_awaitable);
  wire::header_bytes in;
  co_await asio::async_read(s, asio::buffer(in), asio::use_awaitable);
  wire::frame_header theirs;
  if (auto ec = wire::parse(in, theirs); ec || theirs.kind != wire::frame_kind::hello)
    throw boost::system::system_error(ec ? ec : make_error_code(errc::protocol_error));
  if (theirs.word != wire::version)
    throw boost::system::system_error(make_error_code(errc::version_mismatch));
  server_max_request_ = static_cast<std::size_t>(theirs.call_id);
  server_pulls_ = rdma && (theirs.deadline_ms & wire::feature_bulk) != 0;
}

asio::awaitable<void> client_connection::connect_and_hello(endpoint ep) {
  if (ep.transport == transport_kind::tcp) {
    asio::ip::tcp::resolver resolver(ex_);
    auto found = co_await resolver.async_resolve(ep.host, std::to_string(ep.port),
                                                 asio::use_awaitable);
    asio::ip::tcp::socket socket(ex_);
    co_await asio::async_connect(socket, found, asio::use_awaitable);
    socket.set_option(asio::ip::tcp::no_delay(true));
    socket.set_option(asio::socket_base::keep_alive(true));
    co_await hello(socket);
    transport_ = make_transport(std::move(socket));
  } else {
    connection_options conn = options_.rdma_connection;
    if (conn.keepalive_interval.count() == 0)
      conn.keepalive_interval = std::chrono::seconds(1);
    auto s = co_await async_connect_stream(ex_, ep.host, ep.port, conn, options_.rdma_stream,
                                           asio::use_awaitable);
    co_await hello(s);
    transport_ = make_transport(std::move(s));
  }
}

void client_connection::adopt(std::unique_ptr<transport> t, std::size_t server_max_request) {
  transport_ = std::move(t);
  server_max_request_ = server_max_request;
  server_pulls_ = false; // no hello told of bulk requests
  established();
}

void client_connection::established() {
  up_ = true;
  rdma_ = transport_->rdma_connection();
  // Calls queued before the server's limit, and whether it reads bulk requests, were known.
  calls_.for_each_in_use([&](std::uint64_t, call_slot& c) {
    if (!c.op || c.frame.where != outgoing_frame::place::queued)
      return;
    error_code ec;
    if (c.request.size() > server_max_request_)
      ec = make_error_code(errc::request_too_large);
    else
      ec = expose(c);
    if (ec && writer_.withdraw(c.frame)) {
      deliver(c, ec, false, from::completion_path);
      maybe_release(c);
    }
  });
  if (watcher_)
    watcher_->connection_up(*this);
  read_more();
  kick();
}

void client_connection::call(std::uint32_t method, asio::const_buffer request,
                             std::chrono::milliseconds deadline, call_completion&& op) {
  if (failed())
    return op.fail(ex_, from::user_call, failed_);
  if (request.size() > std::numeric_limits<std::uint32_t>::max() ||
      (up_ && request.size() > server_max_request_))
    return op.fail(ex_, from::user_call, make_error_code(errc::request_too_large));
  auto [id, c] = calls_.acquire([&] { return call_slot(ex_); });
  c->id = id;
  c->op = std::move(op);
  c->request_out = c->answered = c->reading = c->held_with_response = false;
  c->held.reset();
  const auto ms = std::clamp<std::int64_t>(deadline.count(), 1, 0xffffffffLL);
  wire::encode({wire::frame_kind::request, static_cast<std::uint32_t>(request.size()), id, method,
                static_cast<std::uint32_t>(ms)},
               c->frame.header);
  c->request = request;
  c->frame.payload = request;
  c->frame.trailer = asio::const_buffer();
  c->frame.owner = c;
  c->exposed.reset();
  c->reply_exposed.reset();
  c->release_pending = false;
  if (up_) {
    if (auto ec = expose(*c)) {
      c->op.fail(ex_, from::user_call, ec);
      return maybe_release(*c);
    }
  }
  // A raw pointer: the slot's handler is removed when the call completes, which close()
  // does for every call before the connection can go.
  c->op.on_cancel([this, id = id](asio::cancellation_type) {
    end_call(id, asio::error::operation_aborted, from::user_call);
  });
  c->deadline = call_deadlines::clock::now() + std::chrono::milliseconds(ms);
  deadlines_.watch(c->deadline, this);
  writer_.push(c->frame);
  kick();
}

void client_connection::expire_calls(call_deadlines::clock::time_point now) {
  calls_.for_each_in_use([&](std::uint64_t id, call_slot& c) {
    if (!c.op || c.held) // ended, or its end waits for a write or read
      return;
    if (c.deadline <= now)
      end_call(id, make_error_code(errc::deadline_exceeded), from::completion_path);
    else
      deadlines_.watch(c.deadline, this);
  });
}

void client_connection::end_call(std::uint64_t id, const error_code& ec, from origin) {
  call_slot* c = calls_.find(id);
  if (!c || !c->op || c->held)
    return;
  finish(*c, ec, false, origin);
  if ((!c->op || c->held) && c->request_out && !c->answered)
    send_cancel(*c);
  maybe_release(*c);
}

void client_connection::finish(call_slot& c, const error_code& ec, bool with_response,
                               from origin) {
  // While the request is being written from the caller's buffer, or a reply read into
  // it, the end waits for that.
  const bool busy =
      c.reading || (!c.request_out && !writer_.withdraw(c.frame)) || server_may_access(c);
  if (!busy)
    return deliver(c, ec, with_response, origin);
  c.held = ec;
  c.held_with_response = with_response;
  if (server_may_access(c))
    hold_for_server(c);
}

// The server may write into the call's exposed reply buffer, or read the caller's own
// registered memory its request was advertised from: it has the request and has not
// answered, and the connection still stands.
bool client_connection::server_may_access(const call_slot& c) const noexcept {
  const bool exposed = c.reply_exposed || (c.exposed && c.exposed->in_callers_memory());
  return exposed && c.request_out && !c.answered && !failed();
}

// The call has ended while the server may still write into its buffer (or read the
// caller's memory): the end waits for the server's answer (a cancel frame asks for it),
// within reply_buffer_grace.
void client_connection::hold_for_server(call_slot& c) {
  c.waiting_grace = true;
  c.timer.expires_after(options_.reply_buffer_grace);
  c.timer.async_wait([self = shared_from_this(), id = c.id](const error_code& ec) {
    call_slot* held = ec ? nullptr : self->calls_.find(id);
    if (held && held->held && self->server_may_access(*held))
      self->fail(asio::error::timed_out, from::completion_path);
  });
}

void client_connection::deliver(call_slot& c, const error_code& ec, bool with_response,
                                from origin) {
  if (std::exchange(c.waiting_grace, false))
    c.timer.cancel();
  c.held.reset();
  if (with_response)
    c.op.deliver(ex_, origin, ec, c.response, c.reply_length);
  else
    c.op.fail(ex_, origin, ec);
}

void client_connection::deliver_held(call_slot& c, from origin) {
  if (c.held && c.request_out && !c.reading && !server_may_access(c))
    deliver(c, *c.held, c.held_with_response, origin);
}

void client_connection::send_cancel(call_slot& c) {
  if (failed())
    return;
  wire::encode({wire::frame_kind::cancel, 0, c.id, 0, 0}, c.frame.header);
  c.frame.payload = c.frame.trailer = asio::const_buffer();
  writer_.push(c.frame);
  kick();
}

void client_connection::maybe_release(call_slot& c) {
  // (!in_use: released already, by the write of its last frame, which can complete at
  // once inside send_cancel or send_release.)
  if (!c.in_use || c.op || c.reading || c.frame.where != outgoing_frame::place::none)
    return;
  // Over RDMA the server may still read a bulk request, or answer with a bulk reply to
  // release: the slot waits for its answer (or the connection's end).
  if (rdma_ && c.request_out && !c.answered && !failed())
    return;
  c.response.clear();
  c.exposed.reset();
  c.reply_exposed.reset();
  calls_.release(c.id);
}

bool client_connection::wants_bulk(std::size_t bytes) const noexcept {
  return rdma_ && server_pulls_ && options_.bulk_threshold != 0 &&
         bytes >= options_.bulk_threshold;
}

// Over RDMA: registers a large request's bytes for the server to read, and a reply
// buffer the caller exposes for it to write; the frame (queued, not written) carries
// their descriptors.
error_code client_connection::expose(call_slot& c) {
  error_code ec;
  if (wants_bulk(c.request.size())) {
    c.exposed.emplace(
        *rdma_, c.request, exposed_payload::peer_may::read, c.op.request_memory(), ec);
    if (ec) {
      c.exposed.reset();
      return ec;
    }
  }
  if (rdma_ && server_pulls_ && c.op.expose() && c.op.into().size() != 0) {
    c.reply_exposed.emplace(
        *rdma_, c.op.into(), exposed_payload::peer_may::write, c.op.reply_memory(), ec);
    if (ec) {
      c.exposed.reset();
      c.reply_exposed.reset();
      return ec;
    }
  }
  shape_request(c);
  return {};
}

// A request frame's payload and flags: the request's bytes, or its descriptor when bulk,
// then the exposed reply buffer's descriptor.
void client_connection::shape_request(call_slot& c) {
  std::uint8_t flags = 0;
  c.frame.payload = c.request;
  c.frame.trailer = asio::const_buffer();
  if (c.exposed) {
    flags |= wire::flag_bulk;
    c.frame.payload = asio::buffer(c.exposed->descriptor());
  }
  if (c.reply_exposed) {
    flags |= wire::flag_reply_buffer;
    c.frame.trailer = asio::buffer(c.reply_exposed->descriptor());
  }
  wire::set_payload(c.frame.header, flags, c.frame.payload.size() + c.frame.trailer.size());
}

void client_connection::send_release(call_slot& c) {
  if (failed())
    return;
  if (c.frame.where == outgoing_frame::place::writing) {
    c.release_pending = true; // pushed when that write is done
    return;
  }
  // A cancel frame still queued becomes the release: the server has answered already.
  wire::encode({wire::frame_kind::release, 0, c.id, 0, 0}, c.frame.header);
  c.frame.payload = c.frame.trailer = asio::const_buffer();
  if (c.frame.where == outgoing_frame::place::none) {
    writer_.push(c.frame);
    kick();
  }
}

void client_connection::close(const error_code& why, from origin) { fail(why, origin); }

void client_connection::fail(const error_code& ec, from origin) {
  if (failed())
    return;
  failed_ = ec;
  up_ = false;
  connect_cancel_.emit(asio::cancellation_type::terminal);
  connect_timer_.cancel();
  deadlines_.stop();
  if (transport_)
    transport_->close();
  // Requests still queued are withdrawn and their calls end now; a request being written
  // ends its call when the write completes (with an error: the transport is closed).
  calls_.for_each_in_use([&](std::uint64_t, call_slot& c) {
    if (c.op && !c.held)
      finish(c, ec, false, origin);
    else if (c.held && c.request_out && !c.reading) // held for the server's writes, which
      deliver(c, *c.held, c.held_with_response, origin); // the closed transport stops
  });
  writer_.drop_queued(); // cancel frames
  calls_.for_each_in_use([&](std::uint64_t, call_slot& c) { maybe_release(c); });
  if (auto* w = std::exchange(watcher_, nullptr))
    w->connection_failed(*this, ec);
}

void client_connection::kick() {
  if (kicking_) // a frame queued by the loop below: its next round writes it
    return;
  kicking_ = true;
  while (up_ && !writer_.writing() && writer_.has_queued()) {
    const auto buffers = writer_.start_batch();
    // Most batches fit in the stream at once: written, with no operation to complete.
    const std::size_t taken = transport_->write_now(buffers);
    if (taken < asio::buffer_size(buffers)) {
      transport_->write(buffers, taken, {&on_written, shared_from_this()});
      break;
    }
    // Not from the completion path: a call this ends completes through a post.
    batch_written(error_code(), from::user_call);
  }
  kicking_ = false;
}

void client_connection::on_written(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<client_connection*>(p);
  self.batch_written(ec, from::completion_path);
  if (!ec)
    self.kick();
}

void client_connection::batch_written(const error_code& ec, from origin) {
  for (auto* f = writer_.finish_batch(); f;) {
    auto* next = f->next;
    // The frame's own slot, with no lookup: maybe_release() keeps a slot whose frame is
    // queued or being written, so it is still this frame's call. Only fail(), run by a
    // handler this loop delivered to, releases slots whose calls have ended: skipped.
    call_slot& c = slot_of(*f);
    f = next;
    if (!c.in_use)
      continue;
    if (!c.request_out) {
      c.request_out = true;
      deliver_held(c, origin);
      // Ended (cancelled, deadline) while its request was written: the server has it.
      if ((!c.op || c.held) && !c.answered && !ec)
        send_cancel(c);
      if (c.held && server_may_access(c))
        hold_for_server(c);
    }
    if (std::exchange(c.release_pending, false))
      send_release(c);
    maybe_release(c);
  }
  if (ec)
    fail(ec, from::completion_path);
}

void client_connection::read_more() {
  transport_->read_some(reader_.space(), {&on_read, shared_from_this()});
}

void client_connection::on_read(void* p, const error_code& ec, std::size_t n) {
  auto& self = *static_cast<client_connection*>(p);
  if (self.failed())
    return;
  if (ec)
    return self.transport_failed(ec);
  self.reader_.commit(n);
  self.take_frames();
}

// Every frame buffered, then the next read (unless a payload's rest is being read).
void client_connection::take_frames() {
  while (!failed()) {
    discard_left_ -= reader_.skip(discard_left_);
    if (discard_left_ > 0)
      break;
    error_code bad;
    if (!reader_.next_header(header_, bad))
      break;
    if (bad)
      return fail(bad, from::completion_path);
    if (!take_frame())
      return;
  }
  if (!failed())
    read_more();
}

// The frame whose header was just taken: false while its payload's rest is read.
bool client_connection::take_frame() {
  const auto& h = header_;
  if (h.kind != wire::frame_kind::reply && h.kind != wire::frame_kind::error) {
    fail(make_error_code(errc::protocol_error), from::completion_path);
    return true;
  }
  if (h.kind == wire::frame_kind::error && h.length > wire::max_error_message) {
    fail(make_error_code(errc::protocol_error), from::completion_path);
    return true;
  }
  call_slot* c = calls_.find(h.call_id);
  if (!c || c->answered || (c->frame.where == outgoing_frame::place::queued && !c->request_out)) {
    discard_left_ = h.length; // a call that ended (stale id), or one never sent
    return true;
  }
  c->answered = true;
  if (h.flags == wire::flag_written) {
    // The handler wrote the reply into the caller's buffer already (its length: the word).
    if (!c->reply_exposed) {
      fail(make_error_code(errc::protocol_error), from::completion_path);
      return true;
    }
    if (c->op && !c->held) {
      if (h.word > c->op.into().size()) {
        fail(make_error_code(errc::protocol_error), from::completion_path);
        return true;
      }
      c->reply_length = h.word;
      finish(*c, error_code(), true, from::completion_path);
    }
    deliver_held(*c); // an end that waited for the server's answer
    maybe_release(*c);
    return true;
  }
  if (h.flags == wire::flag_bulk) {
    if (!rdma_) {
      fail(make_error_code(errc::protocol_error), from::completion_path);
      return true;
    }
    return read_payload(*c, c->bulk_reply); // the descriptor; then pull_reply()
  }
  // A call that has ended (its caller may have reused its buffer) drops its reply.
  const bool ended = !c->op || c->held;
  const bool too_large =
      h.kind == wire::frame_kind::reply && h.length > c->op.room(options_.max_response_size);
  if (ended || too_large) {
    if (!ended)
      finish(*c, make_error_code(errc::response_too_large), false, from::completion_path);
    deliver_held(*c); // an end that waited for the server's answer
    maybe_release(*c);
    discard_left_ = h.length;
    return true;
  }
  // A reply goes where the caller wants it; an error's message into the call's own vector.
  c->reply_length = h.length;
  if (h.kind == wire::frame_kind::reply)
    return read_payload(*c, c->op.destination(h.length, c->response));
  c->response.resize(h.length);
  return read_payload(*c, c->response);
}

// The payload of the frame taken into `into`: what is buffered, and the rest read
// straight into it (false then, until it is).
bool client_connection::read_payload(call_slot& c, std::span<std::byte> into) {
  const std::size_t got = reader_.take(into);
  if (got == into.size()) {
    payload_done(c);
    return true;
  }
  c.reading = true;
  reading_id_ = c.id;
  transport_->read(asio::buffer(into.data() + got, into.size() - got),
                   {&on_payload, shared_from_this()});
  return false;
}

void client_connection::on_payload(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<client_connection*>(p);
  call_slot* c = self.calls_.find(self.reading_id_);
  c->reading = false;
  self.deliver_held(*c); // an end that waited for this read
  if (ec || self.failed()) {
    self.maybe_release(*c);
    if (!self.failed())
      self.transport_failed(ec);
    return;
  }
  self.payload_done(*c);
  self.take_frames();
}

void client_connection::payload_done(call_slot& c) {
  if (header_.flags == wire::flag_bulk)
    return pull_reply(c);
  if (c.op && !c.held) {
    const bool ok = header_.kind == wire::frame_kind::reply;
    finish(c, ok ? error_code() : wire::error_of(header_.word), true, from::completion_path);
  }
  maybe_release(c);
}

// A bulk reply's descriptor has been read: the reply is RDMA-read into its destination
// (the caller's buffer or the call's vector), then released; a call that ended, or a reply
// too large for it, is only released.
void client_connection::pull_reply(call_slot& c) {
  const auto found = parse_descriptor(c.bulk_reply, std::numeric_limits<std::uint32_t>::max());
  if (!found)
    return fail(make_error_code(errc::protocol_error), from::completion_path);
  const remote_buffer& reply = *found;
  const bool ended = !c.op || c.held;
  if (ended || reply.length > c.op.room(options_.max_response_size)) {
    if (!ended)
      finish(c, make_error_code(errc::response_too_large), false, from::completion_path);
    deliver_held(c); // an end that waited for the server's answer
    send_release(c);
    return maybe_release(c);
  }
  c.reply_length = static_cast<std::size_t>(reply.length);
  c.reading = true; // an end meanwhile waits for the read into the caller's memory
  pull(*rdma_, c.op.destination(c.reply_length, c.response), reply,
       {&on_pulled, std::make_shared<owner>(owner{shared_from_this(), c.id})});
}

void client_connection::on_pulled(void* p, const error_code& ec, std::size_t) {
  auto& o = *static_cast<owner*>(p);
  auto& self = *o.self;
  call_slot* c = self.calls_.find(o.id); // kept while reading
  c->reading = false;
  self.deliver_held(*c);
  if (ec || self.failed()) {
    self.maybe_release(*c);
    if (!self.failed())
      self.fail(ec, from::completion_path);
    return;
  }
  self.send_release(*c);
  if (c->op && !c->held)
    self.finish(*c, error_code(), true, from::completion_path);
  self.maybe_release(*c);
}

// The stream ended or failed under the connection: an end before the server's goodbye is
// a lost connection.
void client_connection::transport_failed(const error_code& ec) {
  fail(ec == asio::error::eof ? error_code(asio::error::connection_reset) : ec,
       from::completion_path);
}

} // namespace asio_rdma::rpc::detail
