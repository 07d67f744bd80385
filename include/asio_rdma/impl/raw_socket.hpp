// Template bodies of asio_rdma::raw_socket's asynchronous operations. Each initiation only
// type-erases the handler (asio::any_completion_handler keeps its executor, allocator and
// cancellation slot); the operation itself runs in lib/raw.
#pragma once

#include <utility>

namespace asio_rdma {

template <typename CompletionToken>
auto raw_socket::async_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                               CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, receive_batch)>(
      [this](auto handler, std::size_t max, std::chrono::nanoseconds limit) {
        start_receive(max, limit, receive_handler(std::move(handler)));
      },
      token, max_packets, timeout);
}

template <typename CompletionToken>
requires(!std::is_convertible_v<CompletionToken, std::chrono::nanoseconds>) auto raw_socket::
    async_receive(std::size_t max_packets, CompletionToken&& token) {
  return async_receive(max_packets, no_timeout, std::forward<CompletionToken>(token));
}

template <typename CompletionToken>
auto raw_socket::async_acquire(std::size_t n, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, send_batch)>(
      [this](auto handler, std::size_t count) {
        start_acquire(count, acquire_handler(std::move(handler)));
      },
      token, n);
}

template <typename CompletionToken>
auto raw_socket::async_send(send_batch batch, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      [this](auto handler, send_batch packets) {
        start_send(std::move(packets), send_handler(std::move(handler)));
      },
      token, std::move(batch));
}

template <typename CompletionToken> auto raw_socket::async_flush(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      [this](auto handler) { start_flush(send_handler(std::move(handler))); }, token);
}

} // namespace asio_rdma
