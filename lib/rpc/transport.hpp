// What the RPC layer needs of a byte stream, type-erased once per connection (not per
// operation): write all of a buffer sequence, read some bytes or exactly a buffer, close. Made for
// asio_rdma::stream and asio::ip::tcp::socket (transport.cpp). Each completion calls a
// plain function with its owner, which `owner` keeps alive until then: no std::function
// and no allocation per operation (the operations' state is in blocks of the transport's).
#pragma once

#include <asio_rdma/rpc/options.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace asio_rdma::rpc::detail {

/// A completion of a transport's operation: fn(owner.get(), error, bytes).
struct io_done {
  void (*fn)(void* owner, const boost::system::error_code& ec, std::size_t bytes);
  std::shared_ptr<void> owner;
};

class transport {
public:
  virtual ~transport() = default;
  /// Writes every byte of `buffers` (which live until `done`).
  virtual void write(std::span<const boost::asio::const_buffer> buffers, io_done done) = 0;
  /// Reads exactly `buffer.size()` bytes.
  virtual void read(boost::asio::mutable_buffer buffer, io_done done) = 0;
  /// Reads at least one byte into `buffer`, as many as the stream has at hand.
  virtual void read_some(boost::asio::mutable_buffer buffer, io_done done) = 0;
  /// Ends this side's writing gracefully: the peer reads every byte written, then its
  /// end (TCP: a FIN; a stream: its async_shutdown, which completes once the peer's
  /// transport has the end).
  virtual void shutdown(io_done done) = 0;
  /// Closes the stream: pending operations complete (with an error) soon.
  virtual void close() noexcept = 0;
  /// The RDMA connection under the stream, for bulk payloads (bulk_transfer.hpp); nullptr
  /// over TCP.
  virtual asio_rdma::connection* rdma_connection() noexcept { return nullptr; }
};

std::unique_ptr<transport> make_transport(boost::asio::ip::tcp::socket socket);
std::unique_ptr<transport> make_transport(asio_rdma::stream stream);

} // namespace asio_rdma::rpc::detail
