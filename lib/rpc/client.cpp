// rpc::client and its state, client_impl: the channel (lazy connect, backoff after a
// failure) over client_connection.
#include "rpc/client_impl.hpp"

#include "throw_if.hpp"

#include <asio_rdma/rpc/client.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

namespace asio_rdma::rpc {
namespace detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using boost::system::error_code;

client_impl::client_impl(const asio::any_io_executor& ex, std::optional<endpoint> ep,
                         const client_options& options)
    : ex_(ex), endpoint_(std::move(ep)), options_(options), backoff_(options.reconnect_backoff) {}

client_impl::~client_impl() { close(); }

void client_impl::call(std::uint32_t method, asio::const_buffer request, const call_options& o,
                       call_completion&& op) {
  const auto deadline = o.deadline.count() > 0 ? o.deadline : options_.default_deadline;
  if (!o.idempotent || options_.retry.max_attempts < 2)
    return attempt(method, request, deadline, std::move(op));
  auto r = std::make_shared<retrying_call>(*this, method, request, deadline, std::move(op));
  retrying_.push_back(*r);
  r->start();
}

error_code client_impl::open_connection() {
  if (conn_)
    return {};
  if (std::chrono::steady_clock::now() < retry_at_ || !endpoint_)
    return make_error_code(errc::unavailable);
  conn_ = std::make_shared<client_connection>(ex_, options_, this);
  conn_->establish(*endpoint_);
  return {};
}

void client_impl::attempt(std::uint32_t method, asio::const_buffer request,
                          std::chrono::milliseconds deadline, call_completion&& op) {
  if (auto ec = open_connection())
    return op.fail(ex_, from::user_call, ec);
  conn_->call(method, request, deadline, std::move(op));
}

void client_impl::connect(connect_operation&& op) {
  if (connected())
    return op.complete(ex_, from::user_call, error_code());
  if (auto ec = open_connection())
    return op.complete(ex_, from::user_call, ec);
  auto wait = connect_waits_.insert(connect_waits_.end(), std::move(op));
  // Only this wait ends: the connection goes on for the calls waiting on it. (`this` and
  // `wait` stay valid: closing the client ends every wait, removing this handler.)
  wait->on_cancel([this, wait](asio::cancellation_type) {
    connect_operation ended(std::move(*wait));
    connect_waits_.erase(wait);
    ended.complete(ex_, from::user_call, error_code(asio::error::operation_aborted));
  });
}

void client_impl::end_connect_waits(const error_code& ec) {
  for (auto& op : std::exchange(connect_waits_, {}))
    op.complete(ex_, from::user_call, ec);
}

void client_impl::close() noexcept {
  // Calls between attempts end now; those in an attempt end with the connection.
  retrying_.clear_and_dispose([](retrying_call* r) { r->abandon(); });
  if (auto c = std::move(conn_)) {
    c->detach();
    c->close(asio::error::operation_aborted, from::user_call);
  }
  end_connect_waits(asio::error::operation_aborted);
}

memory_region client_impl::register_memory(std::span<std::byte> bytes, access flags,
                                           error_code& ec) const {
  if (!connected()) {
    ec = asio::error::not_connected;
    return {};
  }
  return register_for_bulk(conn_->rdma(), bytes, flags, ec);
}

void client_impl::connection_up(client_connection&) {
  backoff_ = options_.reconnect_backoff;
  end_connect_waits({});
}

void client_impl::connection_failed(client_connection& c, const error_code& ec) {
  if (conn_.get() != &c)
    return;
  const error_code why = ec; // `ec` may be the connection's, which the reset can free
  conn_.reset();
  end_connect_waits(why);
  if (!endpoint_)
    return; // nowhere to reconnect to: calls fail with errc::unavailable from now on
  retry_at_ = std::chrono::steady_clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_reconnect_backoff);
}

void start_connect(client_impl* impl,
                   asio_rdma::detail::pending_operation<void(error_code)>&& op) {
  impl->connect(std::move(op));
}

void start_call(client_impl* impl, std::uint32_t method, asio::const_buffer request,
                const call_options& options, reply_operation&& op) {
  impl->call(method, request, options, call_completion(std::move(op)).with_memory_of(options));
}

void start_call(client_impl* impl, std::uint32_t method, asio::const_buffer request,
                asio::mutable_buffer reply, const call_options& options,
                sized_reply_operation&& op) {
  impl->call(
      method, request, options,
      call_completion(std::move(op), reply, options.expose_reply_buffer).with_memory_of(options));
}

} // namespace detail

client::client(const executor_type& ex, std::string_view url, const client_options& options)
    : ex_(ex) {
  if (const char* why = options.invalid())
    throw boost::system::system_error(make_error_code(asio_rdma::errc::invalid_option), why);
  auto ep = endpoint::parse(url);
  if (!ep)
    throw boost::system::system_error(make_error_code(errc::bad_endpoint), std::string(url));
  impl_ = std::make_unique<detail::client_impl>(ex, std::move(*ep), options);
}

namespace {
template <typename Stream>
std::unique_ptr<detail::client_impl> adopting(const client::executor_type& ex, Stream s,
                                              const client_options& options) {
  if (const char* why = options.invalid())
    throw boost::system::system_error(make_error_code(asio_rdma::errc::invalid_option), why);
  auto impl = std::make_unique<detail::client_impl>(ex, std::nullopt, options);
  impl->adopt(std::move(s));
  return impl;
}
} // namespace

client::client(asio_rdma::stream established, const client_options& options)
    : ex_(established.get_executor()) {
  impl_ = adopting(ex_, std::move(established), options);
}

client::client(boost::asio::ip::tcp::socket established, const client_options& options)
    : ex_(established.get_executor()) {
  boost::system::error_code ignored;
  established.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
  impl_ = adopting(ex_, std::move(established), options);
}

client::client(const executor_type& ex, std::string_view url)
    : client(ex, url, client_options()) {}
client::client(asio_rdma::stream established) : client(std::move(established), client_options()) {}
client::client(boost::asio::ip::tcp::socket established)
    : client(std::move(established), client_options()) {}

client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;
client::~client() = default;

void client::close() noexcept { impl_.reset(); }

bool client::is_connected() const noexcept { return impl_ && impl_->connected(); }

memory_region client::register_memory(std::span<std::byte> bytes, access flags,
                                      error_code& ec) const {
  if (!impl_) {
    ec = asio::error::bad_descriptor;
    return {};
  }
  return impl_->register_memory(bytes, flags, ec);
}

memory_region client::register_memory(std::span<std::byte> bytes, access flags) const {
  error_code ec;
  auto region = register_memory(bytes, flags, ec);
  asio_rdma::detail::throw_if(ec, "rpc::client::register_memory");
  return region;
}

} // namespace asio_rdma::rpc
