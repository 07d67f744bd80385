#include "rpc/call_retry.hpp"

#include "rpc/client_impl.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

#include <algorithm>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using boost::system::error_code;
using std::chrono::steady_clock;

bool worth_retrying(const error_code& ec) noexcept {
  if (!ec.failed() || ec == asio::error::operation_aborted)
    return false;
  if (ec.category() == rpc_category())
    return ec == errc::unavailable || ec == errc::server_draining;
  return true; // the transport's: the connection lost, refused, or not made in time
}

retrying_call::retrying_call(client_impl& client, std::uint32_t method,
                             asio::const_buffer request, std::chrono::milliseconds deadline,
                             call_completion&& op)
    : client_(&client), ex_(client.executor()), method_(method), request_(request),
      deadline_(steady_clock::now() + deadline),
      max_attempts_(client.options().retry.max_attempts),
      backoff_(client.options().retry.backoff), op_(std::move(op)), wait_(ex_) {}

void retrying_call::start() {
  // A raw pointer: the handler is removed when the call completes (finish), and until
  // then the attempt's handler or the wait's keeps this alive.
  op_.on_cancel([this](asio::cancellation_type type) {
    if (in_attempt_)
      return attempt_cancel_.emit(type); // the attempt ends with operation_aborted
    wait_.cancel();
    finish(asio::error::operation_aborted, {}, 0, from::user_call);
  });
  attempt();
}

void retrying_call::attempt() {
  ++attempts_;
  in_attempt_ = true;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - steady_clock::now());
  const auto deadline = std::max(left, std::chrono::milliseconds(1));
  // The attempt completes as the caller's call does: with a vector, or into its buffer.
  auto self = shared_from_this();
  if (op_.in_callers_buffer())
    client_->attempt(method_, request_, deadline,
                     call_completion(sized_reply_operation(
                                         asio::bind_cancellation_slot(
                                             attempt_cancel_.slot(),
                                             [self](error_code ec, std::size_t length) {
                                               self->attempt_done(ec, {}, length);
                                             }),
                                         ex_),
                                     op_.into()));
  else
    client_->attempt(method_, request_, deadline,
                     reply_operation(asio::bind_cancellation_slot(
                                         attempt_cancel_.slot(),
                                         [self](error_code ec, std::vector<std::byte> reply) {
                                           self->attempt_done(ec, std::move(reply), 0);
                                         }),
                                     ex_));
}

void retrying_call::attempt_done(const error_code& ec, std::vector<std::byte> reply,
                                 std::size_t length) {
  in_attempt_ = false;
  if (!op_)
    return;
  if (!client_ || !worth_retrying(ec) || attempts_ >= max_attempts_)
    return finish(ec, std::move(reply), length, from::completion_path);
  // After the backoff, and not before the channel may connect again.
  const auto at = std::max(steady_clock::now() + backoff_, client_->reconnect_at());
  backoff_ *= 2;
  if (at >= deadline_)
    return finish(ec, std::move(reply), length, from::completion_path);
  wait_.expires_at(at);
  wait_.async_wait([self = shared_from_this()](const error_code& e) {
    if (!e && self->op_)
      self->attempt();
  });
}

void retrying_call::abandon() {
  client_ = nullptr;
  if (in_attempt_)
    return; // the connection's close ends the attempt, then the call
  wait_.cancel();
  finish(asio::error::operation_aborted, {}, 0, from::user_call);
}

void retrying_call::finish(const error_code& ec, std::vector<std::byte> reply,
                           std::size_t length, from origin) {
  if (client_)
    client_->forget(*this);
  op_.complete(ex_, origin, ec, std::move(reply), length);
}

} // namespace asio_rdma::rpc::detail
