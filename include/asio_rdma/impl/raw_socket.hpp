// Template bodies of asio_rdma::raw_socket's asynchronous operations. Each initiation only
// type-erases the handler (asio::any_completion_handler keeps its executor, allocator and
// cancellation slot); the operation itself runs in lib/raw.
#pragma once

#include <utility>

namespace asio_rdma {

/// The base of raw_socket's initiation objects: the socket, which outlives its operations.
class raw_socket::initiation {
public:
  using executor_type = raw_socket::executor_type;
  explicit initiation(raw_socket* socket) noexcept : socket_(socket) {}
  executor_type get_executor() const noexcept { return socket_->executor_; }

protected:
  raw_socket* socket_;
};

class raw_socket::initiate_async_receive : public raw_socket::initiation {
public:
  using initiation::initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::size_t max, std::chrono::nanoseconds limit) const {
    socket_->start_receive(max, limit, receive_handler(std::move(handler)));
  }
};

class raw_socket::initiate_async_acquire : public raw_socket::initiation {
public:
  using initiation::initiation;
  template <typename Handler> void operator()(Handler&& handler, std::size_t count) const {
    socket_->start_acquire(count, acquire_handler(std::move(handler)));
  }
};

class raw_socket::initiate_async_send : public raw_socket::initiation {
public:
  using initiation::initiation;
  template <typename Handler> void operator()(Handler&& handler, send_batch packets) const {
    socket_->start_send(std::move(packets), send_handler(std::move(handler)));
  }
};

class raw_socket::initiate_async_flush : public raw_socket::initiation {
public:
  using initiation::initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    socket_->start_flush(send_handler(std::move(handler)));
  }
};

template <typename CompletionToken>
auto raw_socket::async_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                               CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, receive_batch)>(
      initiate_async_receive(this), token, max_packets, timeout);
}

template <typename CompletionToken>
requires(!std::is_convertible_v<CompletionToken, std::chrono::nanoseconds>) auto raw_socket::
    async_receive(std::size_t max_packets, CompletionToken&& token) {
  return async_receive(max_packets, no_timeout, std::forward<CompletionToken>(token));
}

template <typename CompletionToken>
auto raw_socket::async_acquire(std::size_t n, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, send_batch)>(
      initiate_async_acquire(this), token, n);
}

template <typename CompletionToken>
auto raw_socket::async_send(send_batch batch, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      initiate_async_send(this), token, std::move(batch));
}

template <typename CompletionToken> auto raw_socket::async_flush(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      initiate_async_flush(this), token);
}

} // namespace asio_rdma
