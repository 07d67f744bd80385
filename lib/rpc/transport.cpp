#include "rpc/transport.hpp"

#include "stream/handler_memory.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <utility>
#include <vector>

namespace asio_rdma::rpc::detail {
namespace {

using asio_rdma::detail::block_handler;
using asio_rdma::detail::handler_block;

/// Room for the operation state of one write or read of either stream, handler included
/// (a TCP socket's reactor operation is the largest): larger ones fall back to the heap.
constexpr std::size_t io_memory_size = 512;

/// A completion that calls `done`, in `block`: one write and one read are in flight at a
/// time, each with its own block, so no operation's state comes from the heap (Asio's
/// recycled memory holds two blocks per thread, fewer than a call has operations).
block_handler<io_memory_size, void, decltype(io_done::fn)>
in_block(io_done&& done, handler_block<io_memory_size>& block) {
  return {std::move(done.owner), &block, done.fn};
}

template <typename Stream> class stream_transport final : public transport {
public:
  explicit stream_transport(Stream s) : stream_(std::move(s)) {
    if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
      // For write_now: a synchronous write_some then says would_block instead of
      // waiting. (Asynchronous operations are not affected.)
      boost::system::error_code ignored;
      stream_.non_blocking(true, ignored);
    }
  }

  std::size_t write_now(std::span<const boost::asio::const_buffer> buffers) override {
    if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
      boost::system::error_code ec; // would_block, or an error the write reports
      return stream_.write_some(buffers, ec);
    } else {
      return asio_rdma::detail::stream_write_now(
          stream_, {{buffers.data(), buffers.size(), false}, boost::asio::buffer_size(buffers)});
    }
  }

  void write(std::span<const boost::asio::const_buffer> buffers, std::size_t skip,
             io_done done) override {
    if (skip == 0)
      return boost::asio::async_write(stream_, buffers, in_block(std::move(done), write_memory_));
    // The rest after what write_now took (rest_ keeps its capacity: no allocation once
    // it has held a full batch).
    rest_.clear();
    for (const auto& b : buffers) {
      if (skip >= b.size()) {
        skip -= b.size();
        continue;
      }
      rest_.push_back(b + skip);
      skip = 0;
    }
    boost::asio::async_write(stream_, std::span<const boost::asio::const_buffer>(rest_),
                             in_block(std::move(done), write_memory_));
  }

  void read(boost::asio::mutable_buffer buffer, io_done done) override {
    boost::asio::async_read(stream_, buffer, in_block(std::move(done), read_memory_));
  }

  void read_some(boost::asio::mutable_buffer buffer, io_done done) override {
    stream_.async_read_some(buffer, in_block(std::move(done), read_memory_));
  }

  void shutdown(io_done done) override {
    if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
      boost::system::error_code ec;
      stream_.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
      boost::asio::post(stream_.get_executor(),
                        [done = std::move(done), ec] { done.fn(done.owner.get(), ec, 0); });
    } else {
      stream_.async_shutdown([done = std::move(done)](const boost::system::error_code& ec) {
        done.fn(done.owner.get(), ec, 0);
      });
    }
  }

  void close() noexcept override {
    boost::system::error_code ignored;
    if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
      stream_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
      stream_.close(ignored);
    } else {
      stream_.close();
    }
  }

  asio_rdma::connection* rdma_connection() noexcept override {
    if constexpr (std::is_same_v<Stream, asio_rdma::stream>)
      return &stream_.underlying_connection();
    else
      return nullptr;
  }

private:
  Stream stream_;
  handler_block<io_memory_size> write_memory_, read_memory_;
  std::vector<boost::asio::const_buffer> rest_;
};

} // namespace

std::unique_ptr<transport> make_transport(boost::asio::ip::tcp::socket socket) {
  return std::make_unique<stream_transport<boost::asio::ip::tcp::socket>>(std::move(socket));
}

std::unique_ptr<transport> make_transport(asio_rdma::stream stream) {
  return std::make_unique<stream_transport<asio_rdma::stream>>(std::move(stream));
}

} // namespace asio_rdma::rpc::detail
