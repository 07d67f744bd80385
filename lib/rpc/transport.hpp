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
  /// Takes at once, without waiting and with no handler, as many of the first bytes of
  /// `buffers` as the stream has room for; returns how many (0 when it would have to wait,
  /// or after an error, which write() then reports). The common case, a few frames with
  /// room for them, costs no operation at all (no post, no completion). Only while no
  /// write() is in flight.
  virtual std::size_t write_now(std::span<const boost::asio::const_buffer> buffers) = 0;
  /// Writes every byte of `buffers` after the first `skip` (those write_now took): the
  /// buffers live until `done`.
  virtual void write(std::span<const boost::asio::const_buffer> buffers, std::size_t skip,
                     io_done done) = 0;
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
