// Where a call's request bytes are for call_context::request_bulk(): in the server's memory
// (read by copy), or still in the client's registered memory (read piecewise by RDMA read,
// bulk_transfer.hpp), for a method that reads its bulk requests itself.
#pragma once

#include <asio_rdma/connection.hpp>
#include <asio_rdma/remote_buffer.hpp>
#include <asio_rdma/rpc/server.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <optional>
#include <span>

namespace asio_rdma::rpc::detail {

class request_source {
public:
  explicit request_source(const boost::asio::any_io_executor& ex) : ex_(ex) {}

  /// The request is `bytes`, in memory that outlives the handler.
  void in_memory(std::span<const std::byte> bytes) noexcept {
    bytes_ = bytes;
    remote_.reset();
  }
  /// The request is the client's `where`, read over `conn`.
  void in_peer(asio_rdma::connection& conn, const remote_buffer& where) noexcept {
    conn_ = &conn;
    remote_ = where;
    bytes_ = {};
  }

  std::size_t size() const noexcept {
    return remote_ ? static_cast<std::size_t>(remote_->length) : bytes_.size();
  }
  const boost::asio::any_io_executor& executor() const noexcept { return ex_; }

  /// Reads into `into`, from the client's memory into memory the handler registered
  /// (`holding`, or null: `into` is registered for the read).
  void read(std::size_t offset, boost::asio::mutable_buffer into, const memory_region* holding,
            asio_rdma::detail::pending_operation<void(error_code, std::size_t)>&& op);

private:
  boost::asio::any_io_executor ex_;
  std::span<const std::byte> bytes_;
  asio_rdma::connection* conn_ = nullptr;
  std::optional<remote_buffer> remote_;
};

} // namespace asio_rdma::rpc::detail
