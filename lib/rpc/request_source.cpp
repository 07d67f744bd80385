#include "rpc/request_source.hpp"

#include "rpc/bulk_transfer.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

namespace asio_rdma::rpc::detail {

namespace asio = boost::asio;
using asio_rdma::detail::from;
using read_operation = asio_rdma::detail::pending_operation<void(error_code, std::size_t)>;

namespace {
/// A piece being RDMA-read: the handler's operation until the read completes.
struct piece_read {
  read_operation op;
  asio::any_io_executor ex;
  std::size_t bytes;

  static void done(void* p, const error_code& ec, std::size_t) {
    auto& self = *static_cast<piece_read*>(p);
    self.op.complete(self.ex, from::completion_path, ec, ec ? 0 : self.bytes);
  }
};
} // namespace

void request_source::read(std::size_t offset, asio::mutable_buffer into,
                          const memory_region* holding, read_operation&& op) {
  const std::size_t total = size();
  if (offset >= total)
    return op.complete(ex_, from::user_call, error_code(asio::error::eof), std::size_t(0));
  const std::size_t n = std::min(into.size(), total - offset);
  if (n == 0)
    return op.complete(ex_, from::user_call, error_code(), std::size_t(0));
  if (!remote_) {
    std::memcpy(into.data(), bytes_.data() + offset, n);
    return op.complete(ex_, from::user_call, error_code(), n);
  }
  auto state = std::make_shared<piece_read>(piece_read{std::move(op), ex_, n});
  pull(*conn_, std::span<std::byte>(static_cast<std::byte*>(into.data()), n), holding,
       remote_->slice(offset, n), {&piece_read::done, state});
}

void start_request_read(request_source* source, std::size_t offset, asio::mutable_buffer into,
                        const memory_region* holding, read_operation&& op) {
  source->read(offset, into, holding, std::move(op));
}

std::size_t request_size(const request_source* source) noexcept {
  return source ? source->size() : 0;
}

} // namespace asio_rdma::rpc::detail
