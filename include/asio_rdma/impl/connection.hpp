// Template bodies of asio_rdma::connection.
#pragma once

namespace asio_rdma {

template <typename ConstBufferSequence, typename CompletionToken>
auto connection::async_send(const ConstBufferSequence& buffers, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      [](auto handler, detail::connection_impl* impl, const detail::const_buffer_array& b) {
        if (!impl)
          return detail::post_result(std::move(handler),
                                     error_code(boost::asio::error::not_connected), std::size_t(0));
        detail::start_send(impl, b, std::move(handler));
      },
      token, impl_.get(),
      detail::make_buffer_array<boost::asio::const_buffer>(buffers));
}

template <typename MutableBufferSequence, typename CompletionToken>
auto connection::async_receive(const MutableBufferSequence& buffers, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      [](auto handler, detail::connection_impl* impl, const detail::mutable_buffer_array& b) {
        if (!impl)
          return detail::post_result(std::move(handler),
                                     error_code(boost::asio::error::not_connected), std::size_t(0));
        detail::start_receive(impl, b, std::move(handler));
      },
      token, impl_.get(),
      detail::make_buffer_array<boost::asio::mutable_buffer>(buffers));
}

template <typename CompletionToken> auto connection::async_disconnect(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      [](auto handler, detail::connection_impl* impl) {
        if (!impl)
          return detail::post_result(std::move(handler),
                                     error_code(boost::asio::error::not_connected));
        detail::start_disconnect(impl, std::move(handler));
      },
      token, impl_.get());
}

} // namespace asio_rdma
