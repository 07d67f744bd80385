// asio_rdma::stream's state: the connection it owns, the staging buffer of reads into
// buffers smaller than a message, and the one pending read.
#pragma once

#include "async/fd_waiter.hpp" // single_block_allocator

#include <asio_rdma/connection.hpp>
#include <asio_rdma/stream.hpp>

#include <boost/asio/cancellation_signal.hpp>

#include <cstddef>
#include <memory>

namespace asio_rdma::detail {

class stream_impl : public std::enable_shared_from_this<stream_impl> {
public:
  explicit stream_impl(connection&& established);

  const connection& conn() const noexcept { return conn_; }
  connection_impl* conn_impl() const noexcept { return conn_impl_; }
  const boost::asio::any_io_executor& io() const noexcept { return io_; }
  void close() noexcept { conn_.close(); }

  void read(const buffer_view<boost::asio::mutable_buffer>& buffers,
            pending_operation<void(error_code, std::size_t)>&& op);
  void write(const buffer_view<boost::asio::const_buffer>& buffers,
             pending_operation<void(error_code, std::size_t)>&& op);
  void shutdown(pending_operation<void(error_code)>&& op);

private:
  struct read_continuation;
  struct shutdown_continuation;

  /// The connection's receive for the pending read has completed (`n` bytes in the
  /// staging buffer, or in the reader's own buffers for a direct read).
  void read_finished(error_code ec, std::size_t n);
  /// Copies staged bytes into `buffers`; returns how many.
  std::size_t take_staged(const buffer_view<boost::asio::mutable_buffer>& buffers) noexcept;

  connection conn_;
  connection_impl* conn_impl_;
  boost::asio::any_io_executor io_;

  // Reads. A message larger than the reader's buffers is received here and handed out
  // over several reads: [staged_begin_, staged_end_) is what is left of it.
  std::unique_ptr<std::byte[]> staging_;
  std::size_t staging_size_;
  std::size_t staged_begin_ = 0;
  std::size_t staged_end_ = 0;
  /// The peer's end of data (a zero-length message) or its disconnect has been read:
  /// every later read completes with eof.
  bool eof_ = false;
  /// The pending read, its buffers, and whether the connection receives into them
  /// directly (they hold a whole message) or into the staging buffer.
  pending_operation<void(error_code, std::size_t)> read_op_;
  buffer_array<boost::asio::mutable_buffer> read_buffers_;
  bool read_direct_ = false;
  /// The memory of the connection's receive handler (one read at a time): no
  /// allocation per read.
  single_block<128> read_memory_;

  // Writes.
  bool shut_down_ = false;
  pending_operation<void(error_code)> shutdown_op_;
  single_block<128> shutdown_memory_;
};

} // namespace asio_rdma::detail
