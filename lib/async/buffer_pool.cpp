#include <asio_rdma/buffer_pool.hpp>

#include "throw_if.hpp"

namespace asio_rdma {

buffer_pool::buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count,
                         access flags) {
  error_code ec;
  *this = buffer_pool(conn, buffer_size, count, flags, ec);
  detail::throw_if(ec, "asio_rdma::buffer_pool");
}

buffer_pool::buffer_pool(const connection& conn, std::size_t buffer_size, std::size_t count,
                         access flags, error_code& ec) {
  if (buffer_size == 0 || count == 0 || buffer_size > (std::size_t(1) << 40) / count) {
    ec = boost::asio::error::invalid_argument;
    return;
  }
  auto s = std::make_unique<state>();
  s->region = memory_region(conn, buffer_size * count, flags, ec);
  if (ec)
    return;
  s->buffer_size = buffer_size;
  s->free.reserve(count);
  for (std::size_t i = count; i > 0; --i)
    s->free.push_back(i - 1);
  state_ = std::move(s);
}

std::optional<buffer_pool::lease> buffer_pool::try_acquire() noexcept {
  if (!state_ || state_->free.empty())
    return std::nullopt;
  std::size_t index = state_->free.back();
  state_->free.pop_back();
  return lease(state_.get(), index);
}

} // namespace asio_rdma
