// An idempotent call under client_options::retry: its attempts, the waits between them,
// and the caller's cancellation, which reaches the attempt running or ends the wait.
//
// Opt-in (call_options::idempotent), so it may cost what a plain call does not: one
// allocation for this state per call.
#pragma once

#include "rpc/client_connection.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/intrusive/list.hpp>

#include <chrono>
#include <cstdint>
#include <memory>

namespace asio_rdma::rpc::detail {

class client_impl;

/// Whether a failed attempt may be made again: the failures that say nothing of the
/// server's answer (retry_policy's documentation).
bool worth_retrying(const boost::system::error_code& ec) noexcept;

class retrying_call : public std::enable_shared_from_this<retrying_call>,
                      public boost::intrusive::list_base_hook<> {
public:
  /// The calls a client has under retry, so that closing it ends them.
  using list = boost::intrusive::list<retrying_call>;

  retrying_call(client_impl& client, std::uint32_t method, boost::asio::const_buffer request,
                std::chrono::milliseconds deadline, call_completion&& op);

  /// Makes the first attempt.
  void start();
  /// The client is closing: a wait ends with operation_aborted now, an attempt with the
  /// connection's own (operation_aborted too); nothing refers to the client afterwards.
  void abandon();

private:
  void attempt();
  void attempt_done(const boost::system::error_code& ec, std::vector<std::byte> reply,
                    std::size_t length);
  void finish(const boost::system::error_code& ec, std::vector<std::byte> reply,
              std::size_t length, asio_rdma::detail::from origin);

  client_impl* client_;
  boost::asio::any_io_executor ex_;
  std::uint32_t method_;
  boost::asio::const_buffer request_;
  std::chrono::steady_clock::time_point deadline_;
  unsigned attempts_ = 0;
  unsigned max_attempts_;
  std::chrono::milliseconds backoff_;
  call_completion op_;                          // the caller's
  boost::asio::cancellation_signal attempt_cancel_; // the attempt running, if any
  boost::asio::steady_timer wait_;              // between attempts
  bool in_attempt_ = false;
};

} // namespace asio_rdma::rpc::detail
