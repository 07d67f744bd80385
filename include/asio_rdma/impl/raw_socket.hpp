// Template bodies of asio_rdma::raw_socket's asynchronous operations: named initiation
// objects and the socket's entries into lib/raw (the pattern of detail/pending_operation.hpp).
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>

#include <utility>

namespace asio_rdma {
namespace detail {

// raw_socket's entries into lib/ (see detail/pending_operation.hpp).
using raw_receive_operation = pending_operation<void(error_code, receive_batch)>;
using raw_acquire_operation = pending_operation<void(error_code, send_batch)>;
using raw_send_operation = pending_operation<void(error_code)>;
void start_raw_receive(raw_socket_core* core, std::size_t max_packets,
                       std::chrono::nanoseconds timeout, raw_receive_operation&& pending);
void start_raw_acquire(raw_socket_core* core, std::size_t n, raw_acquire_operation&& pending);
void start_raw_send(raw_socket_core* core, send_batch batch, raw_send_operation&& pending);
void start_raw_flush(raw_socket_core* core, raw_send_operation&& pending);

/// The base of raw_socket's initiation objects: the socket's state (it outlives its
/// operations) and executor. Each completes with bad_descriptor (posted to the handler's
/// own executor) on a socket that is not open, even one that never was.
using raw_initiation = io_initiation<raw_socket_core*>;

/// raw_socket::async_receive.
class initiate_async_raw_receive : public raw_initiation {
public:
  using raw_initiation::raw_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::size_t max, std::chrono::nanoseconds limit) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, receive_batch());
    start_raw_receive(impl_, max, limit,
                      pending<void(error_code, receive_batch)>(std::forward<Handler>(handler)));
  }
};

/// raw_socket::async_acquire.
class initiate_async_raw_acquire : public raw_initiation {
public:
  using raw_initiation::raw_initiation;
  template <typename Handler> void operator()(Handler&& handler, std::size_t count) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, send_batch());
    start_raw_acquire(impl_, count,
                      pending<void(error_code, send_batch)>(std::forward<Handler>(handler)));
  }
};

/// raw_socket::async_send.
class initiate_async_raw_send : public raw_initiation {
public:
  using raw_initiation::raw_initiation;
  template <typename Handler> void operator()(Handler&& handler, send_batch packets) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor);
    start_raw_send(impl_, std::move(packets),
                   pending<void(error_code)>(std::forward<Handler>(handler)));
  }
};

/// raw_socket::async_flush.
class initiate_async_raw_flush : public raw_initiation {
public:
  using raw_initiation::raw_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor);
    start_raw_flush(impl_, pending<void(error_code)>(std::forward<Handler>(handler)));
  }
};

} // namespace detail

template <typename CompletionToken>
auto raw_socket::async_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                               CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, receive_batch)>(
      detail::initiate_async_raw_receive(impl_.get(), ex_), token, max_packets, timeout);
}

template <typename CompletionToken>
requires(!std::is_convertible_v<CompletionToken, std::chrono::nanoseconds>) auto raw_socket::
    async_receive(std::size_t max_packets, CompletionToken&& token) {
  return async_receive(max_packets, no_timeout, std::forward<CompletionToken>(token));
}

template <typename CompletionToken>
auto raw_socket::async_acquire(std::size_t n, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, send_batch)>(
      detail::initiate_async_raw_acquire(impl_.get(), ex_), token, n);
}

template <typename CompletionToken>
auto raw_socket::async_send(send_batch batch, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      detail::initiate_async_raw_send(impl_.get(), ex_), token, std::move(batch));
}

template <typename CompletionToken> auto raw_socket::async_flush(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      detail::initiate_async_raw_flush(impl_.get(), ex_), token);
}

} // namespace asio_rdma
