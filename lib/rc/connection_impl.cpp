// connection_impl: construction, destruction and the entry points the
// connection templates call. The rest is split by concern:
// connection_establish.cpp, connection_send.cpp, connection_receive.cpp,
// connection_close.cpp.
#include "rc/connection_impl.hpp"

namespace asio_rdma::detail {

connection_impl::connection_impl(const asio::any_io_executor& ex, const connection_options& options)
    : ex_(ex), options_(options), timer_(ex), drain_timer_(ex), keepalive_timer_(ex) {}

connection_impl::~connection_impl() {
  if (channel_interest_) // the channel may be shared with an acceptor
    channel_->remove_interest();
  if (cq_interest_)
    cq_->remove_interest();
  teardown();
}

// ---------------------------------------------------------------- entry points

void start_send(connection_impl* impl, const buffer_view<asio::const_buffer>& buffers,
                std::optional<std::uint32_t> immediate, size_handler handler, bool direct) {
  impl->send(buffers, immediate, std::move(handler), direct);
}

void start_work(connection_impl* impl, const work_request& request, size_handler handler,
                bool direct) {
  impl->work(request, std::move(handler), direct);
}

void start_receive_message(connection_impl* impl, const buffer_view<asio::mutable_buffer>& buffers,
                           message_handler handler, bool direct) {
  impl->receive_message(buffers, std::move(handler), direct);
}


void start_receive(connection_impl* impl, const buffer_view<asio::mutable_buffer>& buffers,
                   size_handler handler, bool direct) {
  impl->receive(buffers, std::move(handler), direct);
}

void start_disconnect(connection_impl* impl, void_handler handler) {
  impl->disconnect(std::move(handler));
}

} // namespace asio_rdma::detail
