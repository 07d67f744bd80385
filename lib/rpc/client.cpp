// rpc::client: the channel (lazy connect, backoff after a failure) over client_connection.
#include "rpc/client_connection.hpp"

#include <asio_rdma/rpc/client.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <chrono>
#include <optional>

namespace asio_rdma::rpc {
namespace detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using boost::system::error_code;

class client_impl final : public client_connection::observer {
public:
  client_impl(const asio::any_io_executor& ex, std::optional<endpoint> ep,
              const client_options& options)
      : ex_(ex), endpoint_(std::move(ep)), options_(options),
        backoff_(options.reconnect_backoff) {}

  /// A client of one established stream or socket: never reconnected.
  template <typename Stream> void adopt(Stream s) {
    conn_ = std::make_shared<client_connection>(ex_, options_, this);
    conn_->establish(std::move(s));
  }
  ~client_impl() { close(); }

  void call(std::uint32_t method, asio::const_buffer request, const call_options& o,
            reply_operation&& op) {
    const auto now = std::chrono::steady_clock::now();
    if (!conn_) {
      if (now < retry_at_ || !endpoint_)
        return op.complete(ex_, from::user_call, make_error_code(errc::unavailable),
                           std::vector<std::byte>());
      conn_ = std::make_shared<client_connection>(ex_, options_, this);
      conn_->establish(*endpoint_);
    }
    conn_->call(method, request, o.deadline.count() > 0 ? o.deadline : options_.default_deadline,
                std::move(op));
  }

  void close() noexcept {
    if (auto c = std::move(conn_)) {
      c->detach();
      c->close(asio::error::operation_aborted, from::user_call);
    }
  }

  bool connected() const noexcept { return conn_ && conn_->up(); }

  void connection_up(client_connection&) override { backoff_ = options_.reconnect_backoff; }

  void connection_failed(client_connection& c, const error_code&) override {
    if (conn_.get() != &c)
      return;
    conn_.reset();
    if (!endpoint_)
      return; // nowhere to reconnect to: calls fail with errc::unavailable from now on
    retry_at_ = std::chrono::steady_clock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.max_reconnect_backoff);
  }

private:
  asio::any_io_executor ex_;
  std::optional<endpoint> endpoint_;
  client_options options_;
  std::shared_ptr<client_connection> conn_;
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_;
};

void start_call(client_impl* impl, std::uint32_t method, asio::const_buffer request,
                const call_options& options, reply_operation&& op) {
  impl->call(method, request, options, std::move(op));
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

} // namespace asio_rdma::rpc
