// A connect request taken from the CM, owned until accepted or rejected.
#pragma once

#include "cm/cm_channel.hpp"

#include <asio_rdma/connection_request.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace asio_rdma::detail {

struct pending_request {
  boost::asio::any_io_executor ex;
  std::shared_ptr<cm_channel> channel;
  cm_id_ptr id;
  cm_event event;

  /// Rejects the request (if still owned) when dropped undecided.
  ~pending_request() {
    if (id)
      ::rdma_reject(id.get(), nullptr, 0);
  }
};

} // namespace asio_rdma::detail
