// The library's (and its tests') way to the implementation behind a public
// class; the public classes declare it a friend and keep impl_ private.
#pragma once

#include <asio_rdma/connection.hpp>
#include <asio_rdma/shared_queues.hpp>

#include <memory>

namespace asio_rdma::detail {

struct internal_access {
  static connection_impl* impl(const connection& c) noexcept { return c.impl_.get(); }
  static const std::shared_ptr<shared_queues_impl>& impl(const shared_queues& q) noexcept {
    return q.impl_;
  }
};

} // namespace asio_rdma::detail
