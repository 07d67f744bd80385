#include "rpc/transport.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <utility>

namespace asio_rdma::rpc::detail {
namespace {

template <typename Stream> class stream_transport final : public transport {
public:
  explicit stream_transport(Stream s) : stream_(std::move(s)) {}

  void write(std::span<const boost::asio::const_buffer> buffers, io_done done) override {
    boost::asio::async_write(stream_, buffers,
                             [done = std::move(done)](const boost::system::error_code& ec,
                                                      std::size_t n) {
                               done.fn(done.owner.get(), ec, n);
                             });
  }

  void read(boost::asio::mutable_buffer buffer, io_done done) override {
    boost::asio::async_read(stream_, buffer,
                            [done = std::move(done)](const boost::system::error_code& ec,
                                                     std::size_t n) {
                              done.fn(done.owner.get(), ec, n);
                            });
  }

  void read_some(boost::asio::mutable_buffer buffer, io_done done) override {
    stream_.async_read_some(buffer, [done = std::move(done)](const boost::system::error_code& ec,
                                                             std::size_t n) {
      done.fn(done.owner.get(), ec, n);
    });
  }

  void shutdown(io_done done) override {
    if constexpr (std::is_same_v<Stream, boost::asio::ip::tcp::socket>) {
      boost::system::error_code ec;
      stream_.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
      boost::asio::post(stream_.get_executor(), [done = std::move(done), ec] {
        done.fn(done.owner.get(), ec, 0);
      });
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
};

} // namespace

std::unique_ptr<transport> make_transport(boost::asio::ip::tcp::socket socket) {
  return std::make_unique<stream_transport<boost::asio::ip::tcp::socket>>(std::move(socket));
}

std::unique_ptr<transport> make_transport(asio_rdma::stream stream) {
  return std::make_unique<stream_transport<asio_rdma::stream>>(std::move(stream));
}

} // namespace asio_rdma::rpc::detail
