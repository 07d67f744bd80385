// rpc::server: methods, listeners, connections, the limit of calls in all, and drain.
#include "rpc/server_connection.hpp"
#include "rpc/server_impl.hpp"

#include "rpc/bulk_transfer.hpp"
#include "throw_if.hpp"

#include <asio_rdma/rpc/method_id.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <stdexcept>

namespace asio_rdma::rpc {
namespace detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using boost::system::error_code;

void server_impl::add_method(std::string_view name, method_handler handler,
                             const method_options& options) {
  const auto id = method_id(name);
  if (auto it = methods_.find(id); it != methods_.end())
    throw std::invalid_argument(
        it->second->name == name
            ? "rpc::server: method " + std::string(name) + " exists"
            : "rpc::server: methods " + it->second->name + " and " + std::string(name) +
                  " have the same id; rename one");
  methods_.emplace(id, std::make_unique<method_entry>(std::string(name), std::move(handler),
                                                      options));
}

std::uint16_t server_impl::listen(const endpoint& ep, error_code& ec) {
  ec.clear();
  if (draining_ || shut_) {
    ec = asio::error::operation_aborted;
    return 0;
  }
  if (ep.transport == transport_kind::tcp) {
    auto address = asio::ip::make_address(ep.host, ec);
    if (ec)
      return 0;
    auto a = std::make_unique<asio::ip::tcp::acceptor>(ex_);
    asio::ip::tcp::endpoint where(address, ep.port);
    a->open(where.protocol(), ec);
    if (!ec)
      a->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
      a->bind(where, ec);
    if (!ec)
      a->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return 0;
    const auto port = a->local_endpoint().port();
    tcp_listeners_.push_back(std::move(a));
    accept_tcp(*tcp_listeners_.back());
    return port;
  }
  acceptor_options o;
  o.connection = options_.rdma_connection;
  if (o.connection.keepalive_interval.count() == 0)
    o.connection.keepalive_interval = std::chrono::seconds(1);
  auto a = std::make_unique<asio_rdma::acceptor>(ex_);
  a->listen(ep.host, ep.port, o, ec);
  if (ec)
    return 0;
  const auto port = a->local_endpoint().port();
  rdma_listeners_.push_back(std::move(a));
  accept_rdma(*rdma_listeners_.back());
  return port;
}

// The listeners are the server's: the accept handlers hold the server (weakly: a server
// destroyed closes them, which ends their accepts with operation_aborted).
void server_impl::accept_tcp(asio::ip::tcp::acceptor& a) {
  a.async_accept([weak = weak_from_this(), &a](const error_code& ec, asio::ip::tcp::socket s) {
    auto self = weak.lock();
    if (!self || ec == asio::error::operation_aborted || !a.is_open())
      return;
    if (!ec) {
      error_code ignored;
      s.set_option(asio::ip::tcp::no_delay(true), ignored);
      s.set_option(asio::socket_base::keep_alive(true), ignored);
      self->serve(make_transport(std::move(s)));
    }
    self->accept_tcp(a);
  });
}

void server_impl::accept_rdma(asio_rdma::acceptor& a) {
  a.async_accept_stream(options_.rdma_stream,
                        [weak = weak_from_this(), &a](const error_code& ec, asio_rdma::stream s) {
                          auto self = weak.lock();
                          if (!self || ec == asio::error::operation_aborted || !a.is_open())
                            return;
                          if (!ec)
                            self->serve(make_transport(std::move(s)));
                          self->accept_rdma(a);
                        });
}

void server_impl::serve(std::unique_ptr<transport> t) {
  if (shut_) {
    t->close();
    return;
  }
  auto c = std::make_shared<server_connection>(shared_from_this(), std::move(t));
  connections_.push_back(c);
  c->start();
}

void server_impl::call_ended() {
  --calls_;
  while (has_room() && !waiting_.empty()) {
    auto c = waiting_.front().lock();
    waiting_.pop_front();
    if (c) {
      c->resume();
      break;
    }
  }
  if (draining_ && calls_ == 0 && shutdown_)
    finish_shutdown(from::completion_path);
}

void server_impl::connection_closed(server_connection* c) {
  auto it = std::find_if(connections_.begin(), connections_.end(),
                         [c](const auto& p) { return p.get() == c; });
  if (it != connections_.end())
    connections_.erase(it);
  if (shut_ && shutdown_ && connections_.empty()) {
    grace_timer_.cancel();
    shutdown_.complete(ex_, from::completion_path, error_code());
  }
}

void server_impl::close_listeners() {
  for (auto& a : tcp_listeners_) {
    error_code ignored;
    a->close(ignored);
  }
  for (auto& a : rdma_listeners_)
    a->close();
}

void server_impl::cancel_calls() {
  for (auto& c : std::vector(connections_))
    c->cancel_calls();
}

void server_impl::shutdown(std::chrono::milliseconds grace,
                           asio_rdma::detail::pending_operation<void(error_code)>&& op) {
  if (draining_ || shut_)
    return op.complete(ex_, from::user_call, error_code(asio::error::operation_aborted));
  draining_ = true;
  shutdown_ = std::move(op);
  close_listeners();
  if (calls_ == 0)
    return finish_shutdown(from::user_call);
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || !self->shutdown_)
      return;
    self->cancel_calls();
    // The handlers cancelled get one more second to answer.
    self->grace_timer_.expires_after(std::chrono::seconds(1));
    self->grace_timer_.async_wait([self](const error_code& ec) {
      if (!ec && self->shutdown_)
        self->finish_shutdown(from::completion_path);
    });
  });
}

// Every call has answered (or the grace ran out): each connection is shut down gracefully,
// so that the replies written reach their clients, then closed; the drain completes when
// the last one is, within one more second (then they are closed at once).
void server_impl::finish_shutdown(from origin) {
  shut_ = true;
  waiting_.clear();
  for (auto& c : std::vector(connections_))
    c->close_gracefully();
  if (connections_.empty())
    return shutdown_.complete(ex_, origin, error_code());
  grace_timer_.expires_after(std::chrono::seconds(1));
  grace_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || !self->shutdown_)
      return;
    for (auto& c : std::vector(self->connections_))
      c->close();
    self->connections_.clear();
    self->shutdown_.complete(self->ex_, from::completion_path, error_code());
  });
}

void server_impl::close_all() {
  shut_ = draining_ = true;
  close_listeners();
  grace_timer_.cancel();
  for (auto& c : std::vector(connections_))
    c->close();
  connections_.clear();
  waiting_.clear();
  if (shutdown_)
    shutdown_.complete(ex_, from::user_call, error_code(asio::error::operation_aborted));
}

void start_shutdown(const std::shared_ptr<server_impl>& impl, std::chrono::milliseconds grace,
                    asio_rdma::detail::pending_operation<void(error_code)>&& op) {
  impl->shutdown(grace, std::move(op));
}

} // namespace detail

server::server(const executor_type& ex, const server_options& options) : ex_(ex) {
  if (const char* why = options.invalid())
    throw boost::system::system_error(make_error_code(asio_rdma::errc::invalid_option), why);
  impl_ = std::make_shared<detail::server_impl>(ex, options);
}

server::server(const executor_type& ex) : server(ex, server_options()) {}

server::server(server&&) noexcept = default;
server& server::operator=(server&& other) noexcept {
  if (impl_)
    impl_->close_all();
  impl_ = std::move(other.impl_);
  ex_ = std::move(other.ex_);
  return *this;
}
server::~server() {
  if (impl_)
    impl_->close_all();
}

namespace {
/// The implementation of a server that has one; a server moved from has none and throws.
detail::server_impl& open_impl(const std::shared_ptr<detail::server_impl>& impl,
                               const char* what) {
  if (!impl)
    throw boost::system::system_error(asio::error::bad_descriptor, what);
  return *impl;
}
} // namespace

void server::add_method(std::string_view name, method_handler handler) {
  add_method(name, std::move(handler), method_options());
}

void server::add_method(std::string_view name, method_handler handler,
                        const method_options& options) {
  open_impl(impl_, "rpc::server::add_method").add_method(name, std::move(handler), options);
}

std::uint16_t server::listen(std::string_view url) {
  error_code ec;
  const auto port = listen(url, ec);
  if (ec)
    throw boost::system::system_error(ec, "rpc::server::listen " + std::string(url));
  return port;
}

std::uint16_t server::listen(std::string_view url, error_code& ec) {
  if (!impl_) { // moved from
    ec = asio::error::bad_descriptor;
    return 0;
  }
  auto ep = endpoint::parse(url);
  if (!ep) {
    ec = make_error_code(errc::bad_endpoint);
    return 0;
  }
  return impl_->listen(*ep, ec);
}

void server::serve(asio::ip::tcp::socket socket) {
  error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  open_impl(impl_, "rpc::server::serve").serve(detail::make_transport(std::move(socket)));
}

void server::serve(asio_rdma::stream stream) {
  open_impl(impl_, "rpc::server::serve").serve(detail::make_transport(std::move(stream)));
}

std::size_t server::calls_in_flight() const noexcept { return impl_ ? impl_->calls() : 0; }
std::size_t server::connections() const noexcept { return impl_ ? impl_->connections() : 0; }

memory_region call_context::register_memory(std::span<std::byte> bytes, access flags,
                                            error_code& ec) const {
  return detail::register_for_bulk(rdma_, bytes, flags, ec);
}

memory_region call_context::register_memory(std::span<std::byte> bytes, access flags) const {
  error_code ec;
  auto region = register_memory(bytes, flags, ec);
  asio_rdma::detail::throw_if(ec, "rpc::call_context::register_memory");
  return region;
}

} // namespace asio_rdma::rpc
