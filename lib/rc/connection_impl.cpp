// connection_impl: construction and destruction. The rest is split by concern, each file
// with the entry points (start_*) the connection templates call for it:
// connection_establish.cpp, connection_send.cpp, connection_receive.cpp,
// connection_close.cpp, connection_credits.cpp.
#include "rc/connection_impl.hpp"

namespace asio_rdma::detail {

connection_impl::connection_impl(const asio::any_io_executor& ex, const connection_options& options)
    : ex_(ex), options_(options), credit_timer_(ex), timer_(ex), drain_timer_(ex),
      keepalive_timer_(ex), keepalive_(options.keepalive_count),
      self_(asio::query(ex, asio::execution::context)) {}

connection_impl::~connection_impl() {
  if (channel_interest_) // the channel may be shared with an acceptor
    channel_->remove_interest();
  if (cq_interest_)
    cq_->remove_interest();
  teardown();
}

} // namespace asio_rdma::detail
