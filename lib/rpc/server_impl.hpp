// rpc::server's state: its methods, listeners and connections, the calls running in all
// (for server_options::max_calls), and a drain in progress.
#pragma once

#include "rpc/transport.hpp"

#include <asio_rdma/acceptor.hpp>
#include <asio_rdma/rpc/server.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace asio_rdma::rpc::detail {

class server_connection;

struct method_entry {
  std::string name;
  method_handler handler;
  method_options options;
};

class server_impl : public std::enable_shared_from_this<server_impl> {
public:
  server_impl(const boost::asio::any_io_executor& ex, const server_options& options)
      : ex_(ex), options_(options), grace_timer_(ex) {}

  const boost::asio::any_io_executor& executor() const noexcept { return ex_; }
  const server_options& options() const noexcept { return options_; }
  bool draining() const noexcept { return draining_; }

  void add_method(std::string_view name, method_handler handler, const method_options& options);
  const method_entry* find_method(std::uint32_t id) const noexcept {
    auto it = methods_.find(id);
    return it == methods_.end() ? nullptr : it->second.get();
  }

  std::uint16_t listen(const endpoint& ep, boost::system::error_code& ec);
  void serve(std::unique_ptr<transport> t);

  /// Calls in all: one starts if there is room under max_calls.
  bool has_room() const noexcept { return calls_ < options_.max_calls; }
  void call_started() noexcept { ++calls_; }
  void call_ended();
  /// `c` waits for room under max_calls; told by resume() when there is.
  void wait_for_room(const std::shared_ptr<server_connection>& c) { waiting_.push_back(c); }
  void connection_closed(server_connection* c);

  void shutdown(std::chrono::milliseconds grace,
                asio_rdma::detail::pending_operation<void(boost::system::error_code)>&& op);
  /// Closes listeners and connections at once (the server is destroyed).
  void close_all();

  std::size_t calls() const noexcept { return calls_; }
  std::size_t connections() const noexcept { return connections_.size(); }

private:
  void accept_tcp(boost::asio::ip::tcp::acceptor& a);
  void accept_rdma(asio_rdma::acceptor& a);
  void close_listeners();
  void cancel_calls();
  void finish_shutdown(asio_rdma::detail::from origin);

  boost::asio::any_io_executor ex_;
  server_options options_;
  boost::unordered_flat_map<std::uint32_t, std::unique_ptr<method_entry>> methods_;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> tcp_listeners_;
  std::vector<std::unique_ptr<asio_rdma::acceptor>> rdma_listeners_;
  std::vector<std::shared_ptr<server_connection>> connections_;
  std::deque<std::weak_ptr<server_connection>> waiting_;
  std::size_t calls_ = 0;
  bool draining_ = false;
  bool shut_ = false;
  asio_rdma::detail::pending_operation<void(boost::system::error_code)> shutdown_;
  boost::asio::steady_timer grace_timer_;
};

} // namespace asio_rdma::rpc::detail
