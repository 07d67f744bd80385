// rpc::client's state: the channel to one endpoint (lazy connect, a backoff after a
// failure) over client_connection, and the calls waiting to be retried (call_retry.hpp).
#pragma once

#include "rpc/call_retry.hpp"
#include "rpc/client_connection.hpp"

#include <asio_rdma/rpc/options.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <span>

namespace asio_rdma::rpc::detail {

class client_impl final : public client_connection::observer {
public:
  client_impl(const boost::asio::any_io_executor& ex, std::optional<endpoint> ep,
              const client_options& options);
  ~client_impl();

  /// A client of one established stream or socket: never reconnected.
  template <typename Stream> void adopt(Stream s) {
    conn_ = std::make_shared<client_connection>(ex_, options_, this);
    conn_->establish(std::move(s));
  }

  /// rpc::client::async_call: once, or under the retry policy if it is idempotent.
  void call(std::uint32_t method, boost::asio::const_buffer request, const call_options& o,
            call_completion&& op);
  /// rpc::client::async_connect: completes `op` once the connection is up.
  void connect(asio_rdma::detail::pending_operation<void(boost::system::error_code)>&& op);
  /// One attempt of a call, with this deadline from now.
  void attempt(std::uint32_t method, boost::asio::const_buffer request,
               std::chrono::milliseconds deadline, call_completion&& op);

  /// `r` has ended: it is no longer under retry.
  void forget(retrying_call& r) noexcept { retrying_.erase(retrying_.iterator_to(r)); }

  void close() noexcept;
  bool connected() const noexcept { return conn_ && conn_->up(); }
  /// rpc::client::register_memory.
  memory_region register_memory(std::span<std::byte> bytes, access flags,
                                boost::system::error_code& ec) const;
  /// When the channel may connect again (in the past while it may).
  std::chrono::steady_clock::time_point reconnect_at() const noexcept { return retry_at_; }
  const boost::asio::any_io_executor& executor() const noexcept { return ex_; }
  const client_options& options() const noexcept { return options_; }

  void connection_up(client_connection&) override;
  void connection_failed(client_connection& c, const boost::system::error_code&) override;

private:
  using connect_operation = asio_rdma::detail::pending_operation<void(boost::system::error_code)>;

  /// Starts a connection unless there is one: errc::unavailable during the backoff, or
  /// with nowhere to connect to.
  boost::system::error_code open_connection();
  /// Completes every async_connect waiting, with `ec` (posted: this runs inside the
  /// connection's own work or a user's close()).
  void end_connect_waits(const boost::system::error_code& ec);

  boost::asio::any_io_executor ex_;
  std::optional<endpoint> endpoint_;
  client_options options_;
  std::shared_ptr<client_connection> conn_;
  std::chrono::steady_clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_;
  retrying_call::list retrying_; // idempotent calls, between and during their attempts
  // async_connect's waits for the connection under way: few, and not on a call's path, so
  // a list node each (its iterator is what a cancellation removes).
  std::list<connect_operation> connect_waits_;
};

} // namespace asio_rdma::rpc::detail
