// The library's (and its tests') way to the implementation behind a public
// class; the public classes declare it a friend and keep impl_ private.
#pragma once

#include <asio_rdma/connection.hpp>
#include <asio_rdma/connection_request.hpp>
#include <asio_rdma/shared_queues.hpp>

#include <memory>

namespace asio_rdma::detail {

struct internal_access {
  /// The public handles of what the library made (an established connection,
  /// an acceptor's request): their constructors are private.
  static connection make_connection(std::shared_ptr<connection_impl> impl) noexcept {
    return connection(std::move(impl));
  }
  static connection_request make_request(pending_request_ptr request,
                                           boost::asio::any_io_executor ex) noexcept {
    return connection_request(std::move(request), std::move(ex));
  }
  /// The implementation (null for a connection that is not open), shared: a layer above
  /// may hold it beyond the public object (the stream does).
  static const std::shared_ptr<connection_impl>& impl(const connection& c) noexcept {
    return c.impl_;
  }
  static const std::shared_ptr<shared_queues_impl>& impl(const shared_queues& q) noexcept {
    return q.impl_;
  }
};

} // namespace asio_rdma::detail
