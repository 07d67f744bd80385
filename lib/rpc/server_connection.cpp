#include "rpc/server_connection.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <exception>
#include <string>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::size_t max_error_message = 64 * 1024;

struct handler_outcome {
  std::uint32_t status = 0;
  std::string message;
};

/// A method's handler, as a coroutine of its own: what it returns or throws becomes the
/// call's reply.
asio::awaitable<handler_outcome> run_handler(std::vector<std::byte>* response,
                                             const method_entry* method,
                                             std::span<const std::byte> request,
                                             call_context* context) {
  handler_outcome out;
  try {
    *response = co_await method->handler(request, *context);
  } catch (const boost::system::system_error& e) {
    if (e.code().category() == rpc_category())
      out.status = static_cast<std::uint32_t>(e.code().value());
    else
      out.status = static_cast<std::uint32_t>(errc::handler_failed);
    out.message = e.what();
  } catch (const std::exception& e) {
    out.status = static_cast<std::uint32_t>(errc::handler_failed);
    out.message = e.what();
  } catch (...) {
    out.status = static_cast<std::uint32_t>(errc::handler_failed);
    out.message = "unknown exception";
  }
  co_return out;
}
} // namespace

server_connection::server_connection(std::shared_ptr<server_impl> server,
                                     std::unique_ptr<transport> t)
    : server_(std::move(server)), transport_(std::move(t)) {}

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
  wire::encode({wire::frame_kind::hello, 0, self.server_->options().max_request_size,
                wire::version, 0},
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
  if (h.kind != wire::frame_kind::request || h.length > server_->options().max_request_size ||
      calls_.contains(h.call_id)) {
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
  auto owned = std::make_unique<call>(server_->executor(), m ? std::string_view(m->name) : "",
                                      deadline);
  call& c = *owned;
  c.id = h.call_id;
  c.method = m;
  c.frame.tag = h.call_id;
  c.request.resize(h.length);
  calls_.emplace(h.call_id, std::move(owned));
  server_->call_started();
  const std::size_t got = reader_.take(c.request);
  if (got == h.length) {
    request_done(c);
    return true;
  }
  reading_ = &c;
  transport_->read(asio::buffer(c.request.data() + got, h.length - got),
                   {&on_request, shared_from_this()});
  return false;
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
  if (server_->draining())
    send(c, wire::frame_kind::error, static_cast<std::uint32_t>(errc::server_draining));
  else if (!c.method)
    send(c, wire::frame_kind::error, static_cast<std::uint32_t>(errc::unknown_method));
  else
    run(c);
}

void server_connection::run(call& c) {
  c.running = true;
  if (c.context.deadline() != std::chrono::steady_clock::time_point::max()) {
    c.timer.expires_at(c.context.deadline());
    c.timer.async_wait([self = shared_from_this(), id = c.id](const error_code& ec) {
    if (ec)
      return;
    if (auto it = self->calls_.find(id); it != self->calls_.end())
      self->cancel(*it->second, errc::deadline_exceeded);
    });
  }
  // The call's reply is sent from the completion handler, once the coroutine is over: the
  // call (and its signal, which the coroutine's slot refers to) may go as soon as the reply
  // is written. The signal is shared with the handler, so it outlives the coroutine.
  asio::co_spawn(server_->executor(),
                 run_handler(&c.response, c.method, c.request, &c.context),
                 asio::bind_cancellation_slot(
                     c.signal->slot(), [self = shared_from_this(), &c, keep = c.signal](
                                           std::exception_ptr e, handler_outcome out) {
                       if (e) // only bad_alloc can escape run_handler
                         out = {static_cast<std::uint32_t>(errc::handler_failed), "out of memory"};
                       self->handler_done(c, out.status, out.message);
                     }));
}

void server_connection::handler_done(call& c, std::uint32_t status, std::string_view message) {
  c.running = false;
  c.timer.cancel();
  if (closed_)
    return drop(c);
  if (status == 0)
    return send(c, wire::frame_kind::reply, 0);
  if (c.context.cancelled() && status == static_cast<std::uint32_t>(errc::handler_failed))
    status = static_cast<std::uint32_t>(c.cancel_reason); // it failed of our cancellation
  message = message.substr(0, max_error_message);
  c.response.assign(reinterpret_cast<const std::byte*>(message.data()),
                    reinterpret_cast<const std::byte*>(message.data()) + message.size());
  send(c, wire::frame_kind::error, status);
}

void server_connection::cancel(call& c, errc reason) {
  if (!c.running || c.context.cancelled())
    return;
  c.cancel_reason = reason;
  c.context.mark_cancelled();
  c.signal->emit(asio::cancellation_type::terminal);
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
  if (kind == wire::frame_kind::error && c.response.empty()) {
    const std::string text = make_error_code(static_cast<errc>(word)).message();
    c.response.assign(reinterpret_cast<const std::byte*>(text.data()),
                      reinterpret_cast<const std::byte*>(text.data()) + text.size());
  }
  wire::encode({kind, static_cast<std::uint32_t>(c.response.size()), c.id, word, 0},
               c.frame.header);
  c.frame.payload = asio::buffer(c.response);
  writer_.push(c.frame);
  kick();
}

void server_connection::drop(call& c) {
  const auto id = c.id;
  c.timer.cancel();
  calls_.erase(id);
  server_->call_ended();
  resume();
}

void server_connection::kick() {
  if (closed_ || writer_.writing() || !writer_.has_queued())
    return;
  transport_->write(writer_.start_batch(), {&on_written, shared_from_this()});
}

void server_connection::on_written(void* p, const error_code& ec, std::size_t) {
  auto& self = *static_cast<server_connection*>(p);
  for (auto* f = self.writer_.finish_batch(); f;) {
    auto* next = f->next;
    if (f != &self.hello_)
      if (auto it = self.calls_.find(f->tag); it != self.calls_.end())
        self.drop(*it->second);
    f = next;
  }
  if (self.graceful_ && !ec)
    return self.shut_down_transport();
  if (ec || self.close_after_hello_)
    return self.fail();
  self.kick();
}

void server_connection::close() {
  if (transport_closed_)
    return;
  transport_closed_ = closed_ = true;
  graceful_ = false;
  transport_->close();
  // Replies not yet written are dropped; running handlers are cancelled and dropped when
  // they end; a request or reply being read or written ends with the transport's error.
  for (auto* f = writer_.drop_queued(); f;) {
    auto* next = f->next;
    if (f != &hello_)
      if (auto it = calls_.find(f->tag); it != calls_.end())
        drop(*it->second);
    f = next;
  }
  cancel_calls();
}

void server_connection::close_gracefully() {
  if (closed_)
    return;
  // Nothing more is read or queued; what is being written finishes first.
  closed_ = graceful_ = true;
  for (auto* f = writer_.drop_queued(); f;) {
    auto* next = f->next;
    if (f != &hello_)
      if (auto it = calls_.find(f->tag); it != calls_.end())
        drop(*it->second);
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
