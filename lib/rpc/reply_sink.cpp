#include "rpc/reply_sink.hpp"

#include "rpc/bulk_transfer.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <memory>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using write_operation = asio_rdma::detail::pending_operation<void(error_code, std::size_t)>;

/// A write into the caller's buffer: the handler's operation until it completes. The
/// sink (its call's) lives until no write is in flight: the server answers or drops a
/// call only once its sink has drained.
struct reply_sink::piece_write {
  write_operation op;
  asio::any_io_executor ex;
  std::size_t bytes;
  reply_sink* sink;

  static void done(void* p, const error_code& ec, std::size_t) {
    auto& self = *static_cast<piece_write*>(p);
    self.op.complete(self.ex, from::completion_path, ec, ec ? 0 : self.bytes);
    self.sink->piece_done();
  }
};

void reply_sink::write(std::size_t offset, asio::const_buffer bytes, const memory_region* holding,
                       write_operation&& op) {
  const std::size_t n = bytes.size();
  if (offset > room_ || n > room_ - offset)
    return op.complete(ex_, from::user_call, make_error_code(errc::response_too_large),
                       std::size_t(0));
  if (remote_ && holding && n != 0) {
    // A region that cannot serve fails the write before it counts as part of the reply.
    error_code bad;
    registered_slice(*conn_, holding, bytes.data(), n, access::none, bad);
    if (bad)
      return op.complete(ex_, from::user_call, bad, std::size_t(0));
  }
  used_ = true;
  length_ = std::max(length_, offset + n);
  if (n == 0)
    return op.complete(ex_, from::user_call, error_code(), std::size_t(0));
  if (!remote_) {
    if (bytes_.size() < offset + n)
      bytes_.resize(offset + n);
    std::memcpy(bytes_.data() + offset, bytes.data(), n);
    return op.complete(ex_, from::user_call, error_code(), n);
  }
  ++in_flight_;
  auto state = std::make_shared<piece_write>(piece_write{std::move(op), ex_, n, this});
  push(*conn_, bytes, holding, remote_->slice(offset, n), {&piece_write::done, state});
}

void reply_sink::piece_done() {
  if (--in_flight_ == 0 && drained_.fn) {
    const io_done done = std::exchange(drained_, io_done{});
    done.fn(done.owner.get(), error_code(), 0);
  }
}

void reply_sink::when_drained(io_done done) {
  if (in_flight_ == 0)
    return asio::post(ex_, [done = std::move(done)] { done.fn(done.owner.get(), error_code(), 0); });
  drained_ = std::move(done);
}

void start_reply_write(reply_sink* sink, std::size_t offset, asio::const_buffer bytes,
                       const memory_region* holding, write_operation&& op) {
  sink->write(offset, bytes, holding, std::move(op));
}

std::size_t reply_room(const reply_sink* sink) noexcept { return sink ? sink->room() : 0; }

} // namespace asio_rdma::rpc::detail
