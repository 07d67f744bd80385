#include "rpc/server_connection.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
/// The most bytes of request memory an idle call keeps for the next request.
constexpr std::size_t kept_request_bytes = 16 * 1024;

struct handler_outcome {
  std::uint32_t status = 0;
  std::string message;
};

/// What a handler's exception (`e`) becomes: the error frame's status and message.
handler_outcome outcome_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& x) {
    if (x.code().category() == rpc_category())
      return {static_cast<std::uint32_t>(x.code().value()), x.what()};
    return {static_cast<std::uint32_t>(errc::handler_failed), x.what()};
  } catch (const std::bad_alloc&) {
    return {static_cast<std::uint32_t>(errc::handler_failed), "out of memory"};
  } catch (const std::exception& x) {
    return {static_cast<std::uint32_t>(errc::handler_failed), x.what()};
  } catch (...) {
    return {static_cast<std::uint32_t>(errc::handler_failed), "unknown exception"};
  }
}
} // namespace

void server_connection::call::reset(std::uint64_t call_id, const method_entry* m,
                                    std::chrono::steady_clock::time_point deadline) {
  id = call_id;
  method = m;
  request.clear();
  if (request.capacity() > kept_request_bytes)
    request = {};
  response = {};
  sink.reset();
  context.reset(m ? std::string_view(m->name) : std::string_view(), deadline);
  cancel_reason = errc::cancelled;
  runner = nullptr;
  frame = outgoing_frame{};
  frame.owner = this;
  running = bulk = pulling = cancel_requested = awaiting_release = has_reply_buffer =
      payload_taken = false;
  outcome = 0;
  outcome_message.clear();
  descriptor = {};
  pulled.reset();
  pulled_length = 0;
  next_pull = nullptr;
  exposed.reset();
}

server_connection::server_connection(std::shared_ptr<server_impl> server,
                                     std::unique_ptr<transport> t)
    : server_(std::move(server)), transport_(std::move(t)), deadlines_(server_->executor()),
      rdma_(transport_->rdma_connection()) {}

void server_connection::start() {
  transport_->read(asio::buffer(hello_in_), {&on_hello, shared_from_this()});
}

void server_connection::on_hello(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<server_connection*>(p);
  if (self.closed_)
    return;
  if (ec)
    return self.fail();
  wire::frame_header h;
  if (wire::parse(self.hello_in_, h) || h.kind != wire::frame_kind::hello)
    return self.fail();
  // Our hello answers either way: a client of another version reads it and gives up.
  self.close_after_hello_ = h.word != wire::version;
  self.client_pulls_ = self.rdma_ && (h.deadline_ms & wire::feature_bulk) != 0;
  self.client_max_reply_ = static_cast<std::size_t>(h.call_id);
  // Our features: over RDMA we read bulk requests.
  wire::encode({wire::frame_kind::hello, 0, self.server_->options().max_request_size,
                wire::version, self.rdma_ ? wire::feature_bulk : 0u},
               self.hello_.header);
  self.writer_.push(self.hello_);
  self.kick();
  if (!self.close_after_hello_)
    self.read_more();
}

void server_connection::read_more() {
  transport_->read_some(reader_.space(), {&on_read, shared_from_this()});
}

void server_connection::on_read(void* p, const error_code& ec, std::size_t n) {
  auto& self = *static_cast<server_connection*>(p);
  if (self.closed_)
    return;
  if (ec)
    return self.fail();
  self.reader_.commit(n);
  self.take_frames();
}

// Every frame buffered, then the next read; none while a request waits for room or its
// rest is being read.
void server_connection::take_frames() {
  while (!closed_) {
    error_code bad;
    if (!reader_.next_header(header_, bad))
      return read_more();
    if (bad)
      return fail();
    if (!take_frame())
      return;
  }
}

// The frame whose header was just taken: false if the connection stops taking frames
// (no room, a request's rest being read, a broken frame).
bool server_connection::take_frame() {
  const auto& h = header_;
  if (h.kind == wire::frame_kind::cancel) {
    if (auto it = calls_.find(h.call_id); it != calls_.end())
      cancel(*it->second, errc::cancelled);
    return true;
  }
  if (h.kind == wire::frame_kind::release) {
    // Only for a bulk reply written: anything else is a broken client.
    auto it = calls_.find(h.call_id);
    if (it == calls_.end() || !it->second->awaiting_release) {
      fail();
      return false;
    }
    // Its frame may still be in the write that carries it (the client was quicker than
    // that write's completion): then it goes when that completes.
    it->second->awaiting_release = false;
    if (it->second->frame.where == outgoing_frame::place::none)
      drop(*it->second);
    return true;
  }
  // (A request whose id is still in use fails in new_call: one lookup for both.)
  if (h.kind != wire::frame_kind::request || h.length > server_->options().max_request_size ||
      (h.flags != 0 && !rdma_)) {
    fail();
    return false;
  }
  if (!has_room()) {
    paused_ = true;
    if (!server_->has_room())
      server_->wait_for_room(shared_from_this());
    return false;
  }
  return take_request();
}

bool server_connection::has_room() const noexcept {
  return calls_.size() < server_->options().max_calls_per_connection && server_->has_room();
}

void server_connection::resume() {
  if (!paused_ || closed_)
    return;
  if (!has_room()) {
    if (!server_->has_room())
      server_->wait_for_room(shared_from_this());
    return;
  }
  paused_ = false;
  if (take_request())
    take_frames();
}

// The request whose header was just taken: its call, and its payload from what is
// buffered; false while the payload's rest is being read.
bool server_connection::take_request() {
  const auto& h = header_;
  const method_entry* m = server_->find_method(h.word);
  const auto deadline = h.deadline_ms == 0 ? std::chrono::steady_clock::time_point::max()
                                           : std::chrono::steady_clock::now() +
                                                 std::chrono::milliseconds(h.deadline_ms);
  call* made = new_call(h.call_id, m, deadline);
  if (!made) {
    fail();
    return false;
  }
  call& c = *made;
  c.bulk = (h.flags & wire::flag_bulk) != 0;
  c.has_reply_buffer = (h.flags & wire::flag_reply_buffer) != 0;
  std::span<std::byte> into = c.descriptor; // a bulk request's payload: its descriptor
  if (!c.bulk || c.has_reply_buffer) { // (with a reply buffer: taken apart when read)
    c.request.resize(h.length);
    into = c.request;
  }
  server_->call_started();
  const std::size_t got = reader_.take(into);
  if (got == into.size()) {
    request_done(c);
    return true;
  }
  reading_ = &c;
  transport_->read(asio::buffer(into.data() + got, into.size() - got),
                   {&on_request, shared_from_this()});
  return false;
}

// A call for the request `id`, in calls_: an idle one reused, or a new one; null when a
// call of that id is still running (a broken client).
server_connection::call* server_connection::new_call(std::uint64_t id, const method_entry* m,
                                                     std::chrono::steady_clock::time_point deadline) {
  std::unique_ptr<call> c;
  if (!idle_calls_.empty()) {
    c = std::move(idle_calls_.back());
    idle_calls_.pop_back();
  } else {
    c = std::make_unique<call>(server_->executor(), rdma_);
  }
  auto [at, added] = calls_.try_emplace(id, std::move(c)); // c is left as it was if not added
  if (!added) {
    idle_calls_.push_back(std::move(c));
    return nullptr;
  }
  at->second->reset(id, m, deadline);
  return at->second.get();
}

void server_connection::on_request(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<server_connection*>(p);
  call& c = *std::exchange(self.reading_, nullptr);
  if (self.closed_)
    return self.drop(c);
  if (ec) {
    self.drop(c);
    return self.fail();
  }
  self.request_done(c);
  self.take_frames();
}

void server_connection::request_done(call& c) {
  if (!take_payload(c))
    return fail();
  if (server_->draining())
    send(c, wire::frame_kind::error, static_cast<std::uint32_t>(errc::server_draining));
  else if (!c.method)
    send(c, wire::frame_kind::error, static_cast<std::uint32_t>(errc::unknown_method));
  else if (c.bulk && !c.pulled) {
    const auto where = parse_descriptor(c.descriptor, server_->options().max_request_size);
    if (!where)
      return fail(); // a descriptor no client of ours writes
    if (!c.method->options.reads_request_piecewise)
      return pull_request(c, *where);
    c.source.in_peer(*rdma_, *where); // the handler reads it
    run(c);
  } else {
    c.source.in_memory(c.request_bytes());
    run(c);
  }
}

// The request's payload, read: a reply buffer's descriptor is taken off its end (a bulk
// request's own descriptor is what remains), and the reply's sink set. False if a
// descriptor is malformed.
bool server_connection::take_payload(call& c) {
  if (std::exchange(c.payload_taken, true))
    return true;
  if (c.has_reply_buffer) {
    const std::size_t rest = c.request.size() - wire::descriptor_size;
    descriptor_bytes theirs;
    std::memcpy(theirs.data(), c.request.data() + rest, theirs.size());
    const auto where = parse_descriptor(theirs, std::numeric_limits<std::uint32_t>::max());
    if (!where)
      return false;
    c.sink.to_peer(*rdma_, *where);
    c.request.resize(rest);
    if (c.bulk) {
      std::memcpy(c.descriptor.data(), c.request.data(), c.descriptor.size());
      c.request.clear();
    }
  } else {
    c.sink.in_memory(client_max_reply_);
  }
  return true;
}

// A bulk request: its bytes are RDMA-read from the client's memory, then it runs. Its
// buffer is taken when its read starts (start_pulls), not now: requests waiting for their
// turn hold no memory, so a client that sends many pins no more than what is read at once.
void server_connection::pull_request(call& c, const remote_buffer& from) {
  c.pulled_length = static_cast<std::size_t>(from.length);
  c.pulling = true;
  c.pull_from = from;
  c.next_pull = nullptr;
  (pulls_tail_ ? pulls_tail_->next_pull : pulls_head_) = &c;
  pulls_tail_ = &c;
  start_pulls();
}

namespace {
/// The most bytes of bulk requests a connection reads at once (a larger request is read
/// alone). Why a bound: on SoftRoCE an RDMA read runs to its end inside the
/// ibv_post_send that posts it, so what the connection posts after a read (the replies
/// of the calls before, in the same chain or later) leaves only once the read is done.
/// Reads posted all at once made a 1 MiB echo's calls move in lockstep, the server
/// reading every request while the client waited for replies, then the other way round,
/// one direction of the fabric busy at a time (bench/RESULTS.md, "Bulk reads one
/// megabyte at a time"). A device that reads in the background stays busy with a
/// megabyte in flight.
constexpr std::size_t max_pull_bytes = std::size_t(1) << 20;
} // namespace

// Reads waiting bulk requests, in arrival order, while the bytes in flight allow.
void server_connection::start_pulls() {
  while (pulls_head_ && !closed_) {
    call& c = *pulls_head_;
    // Cancelled while it waited: answered now, unread, whatever is being read meanwhile.
    if (!c.cancel_requested && pull_bytes_ != 0 &&
        pull_bytes_ + c.pulled_length > max_pull_bytes)
      break;
    pulls_head_ = c.next_pull;
    if (!pulls_head_)
      pulls_tail_ = nullptr;
    c.next_pull = nullptr;
    if (c.cancel_requested) {
      c.pulling = false;
      send(c, wire::frame_kind::error, static_cast<std::uint32_t>(c.cancel_reason));
      continue;
    }
    error_code ec;
    c.pulled = take_spare(c.pulled_length, ec);
    if (ec) {
      c.pulling = false;
      fail_call(c, errc::handler_failed, "the request could not be registered: " + ec.message());
      continue;
    }
    pull_bytes_ += c.pulled_length;
    pull(*rdma_, *c.pulled, c.pulled_length, c.pull_from,
         {&on_pulled, std::make_shared<owner>(owner{shared_from_this(), c.id})});
  }
}

namespace {
/// The most bytes of spare bulk buffers a connection keeps.
constexpr std::size_t max_spare_bytes = std::size_t(16) << 20;
/// Buffers are made in multiples of this, so that requests of near sizes share them.
constexpr std::size_t spare_granule = 64 * 1024;
} // namespace

std::unique_ptr<bulk_buffer> server_connection::take_spare(std::size_t n, error_code& ec) {
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it)
    if ((*it)->capacity() >= n && (best == spare_.end() || (*it)->capacity() < (*best)->capacity()))
      best = it;
  if (best != spare_.end()) {
    auto b = std::move(*best);
    spare_.erase(best);
    spare_bytes_ -= b->capacity();
    return b;
  }
  const std::size_t capacity = (n + spare_granule - 1) / spare_granule * spare_granule;
  auto b = std::make_unique<bulk_buffer>(*rdma_, capacity, ec);
  return ec ? nullptr : std::move(b);
}

void server_connection::keep_spare(std::unique_ptr<bulk_buffer> b) {
  if (!b || spare_bytes_ + b->capacity() > max_spare_bytes)
    return;
  spare_bytes_ += b->capacity();
  spare_.push_back(std::move(b));
}

void server_connection::on_pulled(void* p, const error_code& ec, std::size_t) {
  auto& o = *static_cast<owner*>(p);
  auto& self = *o.self;
  auto it = self.calls_.find(o.id); // kept while pulling
  call& c = *it->second;
  c.pulling = false;
  self.pull_bytes_ -= c.pulled_length;
  if (self.closed_)
    return self.drop(c);
  if (ec) {
    // A descriptor outside the client's registered memory fails the read, and with it
    // the connection (as RC does): that client is closed, others go on.
    self.drop(c);
    return self.fail();
  }
  if (c.cancel_requested)
    self.send(c, wire::frame_kind::error, static_cast<std::uint32_t>(c.cancel_reason));
  else
    self.request_done(c);
  self.start_pulls(); // after this call's reply is queued: the reply goes first
}

void server_connection::run(call& c) {
  c.running = true;
  if (c.context.deadline() != std::chrono::steady_clock::time_point::max())
    deadlines_.watch(c.context.deadline(), this);
  // What the handler returns or throws is the reply (a handler that throws before its
  // coroutine begins is answered the same way).
  asio::awaitable<std::vector<std::byte>> handler;
  try {
    handler = c.method->handler(c.request_bytes(), c.context);
  } catch (...) {
    const auto out = outcome_of(std::current_exception());
    return handler_done(c, out.status, out.message);
  }
  // The handler starts here, inside this call, as co_spawn would start it.
  if (!idle_workers_.empty()) {
    worker& w = *idle_workers_.back();
    assign(w, c, std::move(handler));
    return wake_idle_worker();
  }
  worker& w = *workers_.emplace_back(std::make_unique<worker>());
  assign(w, c, std::move(handler));
  // The worker catches what its handlers throw: an exception that ends it came from this
  // connection's own code, and goes to io_context::run().
  asio::co_spawn(server_->executor(), work(w, shared_from_this()),
                 asio::bind_cancellation_slot(w.signal->slot(),
                                              [keep = w.signal](std::exception_ptr e) {
                                                if (e)
                                                  std::rethrow_exception(e);
                                              }));
}

void server_connection::assign(worker& w, call& c,
                               asio::awaitable<std::vector<std::byte>> handler) noexcept {
  c.runner = &w;
  w.assigned = &c;
  w.handler = std::move(handler);
}

void server_connection::idle_wait::operator()(worker::wake_handler h) const {
  w->waiting.emplace(std::move(h));
  self->idle_workers_.push_back(w);
}

asio::awaitable<void> server_connection::work(worker& w, std::shared_ptr<server_connection> keep) {
  // `keep` holds the connection while a handler runs (the call's state is the connection's,
  // and a handler may outlive the connection's place in the server); an idle worker leaves
  // it to the server, and a connection closed ends its idle workers.
  for (;;) {
    if (!w.assigned) { // (a new worker begins with its first call)
      keep.reset(); // not the last: the connection is open, so the server holds it
      co_await asio::async_initiate<const asio::use_awaitable_t<>, void()>(
          idle_wait{this, &w}, asio::use_awaitable);
      if (!w.assigned) // the connection is closed
        co_return;
      keep = shared_from_this();
    }
    call& c = *std::exchange(w.assigned, nullptr);
    std::exception_ptr failure;
    try {
      c.response = co_await std::move(w.handler);
    } catch (...) {
      failure = std::current_exception();
    }
    // The next handler begins as a spawned one would: not cancelled, and with Asio's
    // defaults whatever this one set.
    co_await asio::this_coro::reset_cancellation_state();
    co_await asio::this_coro::throw_if_cancelled(true);
    c.runner = nullptr;
    handler_ended(c, failure);
    if (closed_)
      co_return;
  }
}

void server_connection::handler_ended(call& c, std::exception_ptr failure) {
  if (!failure)
    return handler_done(c, 0, {});
  const auto out = outcome_of(failure);
  handler_done(c, out.status, out.message);
}

void server_connection::wake_idle_worker() {
  worker& w = *idle_workers_.back();
  idle_workers_.pop_back();
  auto wake = std::move(*w.waiting);
  w.waiting.reset();
  std::move(wake)(); // runs it until it waits again, or ends
}

void server_connection::end_idle_workers() {
  // Each ends at once, inside this call: it is woken with no call.
  while (!idle_workers_.empty())
    wake_idle_worker();
}

// Due calls are cancelled by id, after the look at every call: a cancellation may end a
// handler, and its call, at once.
void server_connection::expire_calls(std::chrono::steady_clock::time_point now) {
  std::vector<std::uint64_t> due;
  for (auto& [id, c] : calls_) {
    if (!c->running || c->context.cancelled() ||
        c->context.deadline() == std::chrono::steady_clock::time_point::max())
      continue;
    if (c->context.deadline() <= now)
      due.push_back(id);
    else
      deadlines_.watch(c->context.deadline(), this);
  }
  for (auto id : due)
    if (auto it = calls_.find(id); it != calls_.end())
      cancel(*it->second, errc::deadline_exceeded);
}

void server_connection::handler_done(call& c, std::uint32_t status, std::string_view message) {
  c.running = false;
  if (c.sink.in_flight() == 0)
    return answer(c, status, message);
  // Writes into the caller's buffer are still landing: the answer waits for them, so that
  // none lands once the caller has its buffer back.
  c.outcome = status;
  c.outcome_message = message;
  c.sink.when_drained({&on_drained, std::make_shared<owner>(owner{shared_from_this(), c.id})});
}

void server_connection::on_drained(void* p, const error_code&, std::size_t) {
  auto& o = *static_cast<owner*>(p);
  auto it = o.self->calls_.find(o.id); // kept while its writes drain
  call& c = *it->second;
  o.self->answer(c, c.outcome, c.outcome_message);
}

// The handler's outcome, once no write of its is in flight: the reply it returned, or
// wrote through reply_bulk(), or its error.
void server_connection::answer(call& c, std::uint32_t status, std::string_view message) {
  if (closed_)
    return drop(c);
  if (status == 0 && c.sink.used()) {
    if (!c.response.empty())
      return fail_call(c, errc::handler_failed,
                       "a handler that writes its reply through reply_bulk() returns no bytes");
    if (!c.sink.into_peer()) {
      c.response.swap(c.sink.bytes());
      return send(c, wire::frame_kind::reply, 0);
    }
    // Written into the caller's buffer: the reply says how much.
    wire::encode({wire::frame_kind::reply, 0, c.id, static_cast<std::uint32_t>(c.sink.length()), 0,
                  wire::flag_written},
                 c.frame.header);
    c.frame.payload = asio::const_buffer();
    writer_.push(c.frame);
    return kick();
  }
  if (status == 0)
    return send(c, wire::frame_kind::reply, 0);
  if (c.context.cancelled() && status == static_cast<std::uint32_t>(errc::handler_failed))
    status = static_cast<std::uint32_t>(c.cancel_reason); // it failed of our cancellation
  fail_call(c, static_cast<errc>(status), message);
}

void server_connection::fail_call(call& c, errc status, std::string_view message) {
  message = message.substr(0, wire::max_error_message);
  c.response.assign(reinterpret_cast<const std::byte*>(message.data()),
                    reinterpret_cast<const std::byte*>(message.data()) + message.size());
  send(c, wire::frame_kind::error, static_cast<std::uint32_t>(status));
}

void server_connection::cancel(call& c, errc reason) {
  if (c.pulling && !c.cancel_requested) { // answered once its request is read (or instead)
    c.cancel_requested = true;
    c.cancel_reason = reason;
    return;
  }
  if (!c.running || !c.runner || c.context.cancelled())
    return;
  c.cancel_reason = reason;
  c.context.mark_cancelled();
  c.runner->signal->emit(asio::cancellation_type::terminal);
}

void server_connection::cancel_calls() {
  // By id, not while iterating: a cancellation may end a handler, and its call, at once.
  std::vector<std::uint64_t> ids;
  for (auto& [id, c] : calls_)
    ids.push_back(id);
  for (auto id : ids)
    if (auto it = calls_.find(id); it != calls_.end())
      cancel(*it->second, errc::cancelled);
}

void server_connection::send(call& c, wire::frame_kind kind, std::uint32_t word) {
  if (kind == wire::frame_kind::error && c.response.empty()) { // the error's own text
    const std::string text = make_error_code(static_cast<errc>(word)).message();
    return fail_call(c, static_cast<errc>(word), text.empty() ? "error" : text);
  }
  wire::encode({kind, static_cast<std::uint32_t>(c.response.size()), c.id, word, 0},
               c.frame.header);
  c.frame.payload = asio::buffer(c.response);
  if (kind == wire::frame_kind::reply && !expose_reply(c))
    return; // answered with an error instead
  writer_.push(c.frame);
  kick();
}

// A reply of at least bulk_threshold bytes to a client that reads bulk replies is
// registered for it to read: its frame carries the descriptor. False if the registration
// failed: the call is answered with that error instead.
bool server_connection::expose_reply(call& c) {
  const std::size_t threshold = server_->options().bulk_threshold;
  if (!client_pulls_ || threshold == 0 || c.response.size() < threshold)
    return true;
  error_code ec;
  c.exposed.emplace(*rdma_, asio::buffer(c.response), exposed_payload::peer_may::read, ec);
  if (ec) {
    c.exposed.reset();
    fail_call(c, errc::handler_failed, "the reply could not be registered: " + ec.message());
    return false;
  }
  wire::set_payload(c.frame.header, wire::flag_bulk, wire::descriptor_size);
  c.frame.payload = asio::buffer(c.exposed->descriptor());
  c.awaiting_release = true;
  return true;
}

void server_connection::drop(call& c) {
  // Its frame is in no queue (call_of relies on it): a call is dropped once its reply is
  // written, or taken out of the queue unwritten (close), never while the writer holds it.
  keep_spare(std::move(c.pulled)); // (never while pulling: on_pulled or close end that first)
  // Kept for the next request, up to as many as may run at once.
  auto it = calls_.find(c.id);
  if (idle_calls_.size() < server_->options().max_calls_per_connection)
    idle_calls_.push_back(std::move(it->second));
  calls_.erase(it);
  server_->call_ended();
  resume();
}

void server_connection::kick() {
  if (kicking_) // a frame queued by the loop below: its next round writes it
    return;
  kicking_ = true;
  while (!closed_ && !writer_.writing() && writer_.has_queued()) {
    const auto buffers = writer_.start_batch();
    // Most batches fit in the stream at once: written, with no operation to complete.
    const std::size_t taken = transport_->write_now(buffers);
    if (taken < asio::buffer_size(buffers)) {
      transport_->write(buffers, taken, {&on_written, shared_from_this()});
      break;
    }
    if (!batch_written(error_code()))
      break;
  }
  kicking_ = false;
}

void server_connection::on_written(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<server_connection*>(p);
  if (self.batch_written(ec))
    self.kick();
}

bool server_connection::batch_written(const error_code& ec) {
  for (auto* f = writer_.finish_batch(); f;) {
    auto* next = f->next;
    if (f != &hello_)
      if (call& c = call_of(*f); !c.awaiting_release || closed_)
        drop(c);
    f = next;
  }
  if (graceful_ && !ec) {
    shut_down_transport();
    return false;
  }
  if (ec || close_after_hello_) {
    fail();
    return false;
  }
  return true;
}

void server_connection::close() {
  if (transport_closed_)
    return;
  transport_closed_ = closed_ = true;
  graceful_ = false;
  transport_->close();
  deadlines_.stop();
  // Bulk requests not read yet: nothing will.
  for (call* c = std::exchange(pulls_head_, nullptr); c;) {
    call* next = std::exchange(c->next_pull, nullptr);
    c->pulling = false;
    drop(*c);
    c = next;
  }
  pulls_tail_ = nullptr;
  // Replies not yet written are dropped; running handlers are cancelled and dropped when
  // they end; a request or reply being read or written ends with the transport's error.
  for (auto* f = writer_.drop_queued(); f;) {
    auto* next = f->next;
    if (f != &hello_)
      drop(call_of(*f));
    f = next;
  }
  // Bulk replies the client has not released: its connection is gone.
  std::vector<std::uint64_t> unreleased;
  for (auto& [id, c] : calls_)
    if (c->awaiting_release && c->frame.where == outgoing_frame::place::none)
      unreleased.push_back(id); // (one still being written goes when the write ends)
  for (auto id : unreleased)
    drop(*calls_.at(id));
  cancel_calls();
  end_idle_workers();
}

void server_connection::close_gracefully() {
  if (closed_)
    return;
  // Nothing more is read or queued; what is being written finishes first.
  closed_ = graceful_ = true;
  for (auto* f = writer_.drop_queued(); f;) {
    auto* next = f->next;
    if (f != &hello_)
      drop(call_of(*f));
    f = next;
  }
  cancel_calls();
  if (!writer_.writing())
    shut_down_transport();
}

void server_connection::shut_down_transport() {
  graceful_ = false;
  transport_->shutdown({&on_shut_down, shared_from_this()});
}

void server_connection::on_shut_down(void* p, const error_code&, std::size_t) {
  auto& self = *static_cast<server_connection*>(p);
  self.close();
  self.server_->connection_closed(&self);
}

void server_connection::fail() {
  auto keep = shared_from_this();
  close();
  server_->connection_closed(this);
}

} // namespace asio_rdma::rpc::detail
