// asio_rdma::stream: a byte stream over a connection's messages. A write is one message
// (at most max_message_size bytes); a zero-length message ends the writer's data. A read
// takes a whole message straight into the reader's buffers when they can hold the
// largest one, and otherwise through the staging buffer, handing it out over as many
// reads as it takes. The connection does the rest: ordering, flow control (receive
// buffers running out hold the writer back), failures and cancellation of a waiting
// receive without losing its message.
#include "stream/stream_impl.hpp"

#include "internal_access.hpp"

#include <algorithm>
#include <cstring>

namespace asio_rdma {

namespace asio = boost::asio;

namespace detail {

void start_stream_read(stream_impl* impl, const buffer_view<asio::mutable_buffer>& buffers,
                       pending_operation<void(error_code, std::size_t)>&& op) {
  impl->read(buffers, std::move(op));
}
void start_stream_write(stream_impl* impl, const buffer_view<asio::const_buffer>& buffers,
                        pending_operation<void(error_code, std::size_t)>&& op) {
  impl->write(buffers, std::move(op));
}
void start_stream_shutdown(stream_impl* impl, pending_operation<void(error_code)>&& op) {
  impl->shutdown(std::move(op));
}

/// The connection's receive handler for a read: hands the result to the stream. Its
/// memory is the stream's (one read at a time) and its cancellation slot the reader's,
/// so cancelling the read withdraws the receive, which loses no message.
struct stream_impl::read_continuation {
  std::shared_ptr<stream_impl> self;

  using allocator_type = single_block_allocator<void, sizeof(read_memory_.bytes)>;
  allocator_type get_allocator() const noexcept { return allocator_type(&self->read_memory_); }
  using cancellation_slot_type = asio::cancellation_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept {
    return self->read_op_.cancellation_slot();
  }

  void operator()(error_code ec, const received_message& message) {
    auto s = std::move(self); // the stream lives until the read's handler has run
    s->read_finished(ec, message.size);
  }
};

/// The connection's send handler for the end-of-data message.
struct stream_impl::shutdown_continuation {
  std::shared_ptr<stream_impl> self;

  using allocator_type = single_block_allocator<void, sizeof(shutdown_memory_.bytes)>;
  allocator_type get_allocator() const noexcept {
    return allocator_type(&self->shutdown_memory_);
  }
  using cancellation_slot_type = asio::cancellation_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept {
    return self->shutdown_op_.cancellation_slot();
  }

  void operator()(error_code ec, std::size_t) {
    auto s = std::move(self);
    s->shutdown_op_.complete(s->io_, from::completion_path, ec);
  }
};

stream_impl::stream_impl(connection&& established)
    : conn_(std::move(established)), conn_impl_(internal_access::impl(conn_)),
      io_(conn_.get_executor()), staging_size_(conn_.options().max_message_size) {
  staging_ = std::make_unique<std::byte[]>(staging_size_);
}

void stream_impl::read(const buffer_view<asio::mutable_buffer>& buffers,
                       pending_operation<void(error_code, std::size_t)>&& op) {
  // Only the first 16 buffers are read into (a read may always take fewer bytes).
  if (read_op_)
    return op.complete(io_, from::user_call, asio::error::already_started, 0);
  if (buffers.count == 0)
    return op.complete(io_, from::user_call, error_code(), 0);
  if (staged_begin_ < staged_end_)
    return op.complete(io_, from::user_call, error_code(), take_staged(buffers));
  if (eof_)
    return op.complete(io_, from::user_call, asio::error::eof, 0);
  read_op_ = std::move(op);
  read_buffers_.assign(buffers);
  read_buffers_.too_many = false;
  read_direct_ = read_buffers_.total_size >= staging_size_;
  // The continuation runs on the stream's executor: the receive calls it directly.
  pending_operation<void(error_code, received_message)> receive(
      read_continuation{shared_from_this()}, io_);
  if (read_direct_) {
    start_receive(conn_impl_, read_buffers_.view(), std::move(receive));
  } else {
    single_buffer<asio::mutable_buffer> staging{asio::buffer(staging_.get(), staging_size_)};
    start_receive(conn_impl_, staging.view(), std::move(receive));
  }
}

void stream_impl::read_finished(error_code ec, std::size_t n) {
  if (!ec && n == 0)
    ec = asio::error::eof; // the peer's end of data
  if (ec == asio::error::eof)
    eof_ = true;
  std::size_t taken = 0;
  if (!ec) {
    if (read_direct_) {
      taken = n;
    } else {
      staged_begin_ = 0;
      staged_end_ = n;
      taken = take_staged(read_buffers_.view());
    }
  }
  read_op_.complete(io_, from::completion_path, ec, taken);
}

std::size_t stream_impl::take_staged(const buffer_view<asio::mutable_buffer>& buffers) noexcept {
  std::size_t taken = 0;
  for (std::size_t i = 0; i < buffers.count && staged_begin_ < staged_end_; ++i) {
    std::size_t n = std::min(buffers.items[i].size(), staged_end_ - staged_begin_);
    std::memcpy(buffers.items[i].data(), staging_.get() + staged_begin_, n);
    staged_begin_ += n;
    taken += n;
  }
  return taken;
}

void stream_impl::write(const buffer_view<asio::const_buffer>& buffers,
                        pending_operation<void(error_code, std::size_t)>&& op) {
  if (shut_down_)
    return op.complete(io_, from::user_call, asio::error::shut_down, 0);
  if (buffers.total_size == 0 && !buffers.too_many)
    return op.complete(io_, from::user_call, error_code(), 0);
  // One message: the first 16 buffers, cut at max_message_size (a write may always
  // take fewer bytes). Empty buffers are skipped: a zero-length message means the end.
  const_buffer_array message;
  std::size_t room = staging_size_;
  for (std::size_t i = 0; i < buffers.count && room > 0; ++i) {
    std::size_t n = std::min(buffers.items[i].size(), room);
    if (n == 0)
      continue;
    message.push_back(asio::const_buffer(buffers.items[i].data(), n));
    room -= n;
  }
  if (message.total_size == 0)
    return op.complete(io_, from::user_call, error_code(), 0);
  start_send(conn_impl_, message.view(), std::nullopt, std::move(op));
}

void stream_impl::shutdown(pending_operation<void(error_code)>&& op) {
  if (shut_down_ || shutdown_op_)
    return op.complete(io_, from::user_call, error_code());
  shut_down_ = true;
  shutdown_op_ = std::move(op);
  start_send(conn_impl_, buffer_view<asio::const_buffer>{}, std::nullopt,
             pending_operation<void(error_code, std::size_t)>(
                 shutdown_continuation{shared_from_this()}, io_));
}

} // namespace detail

stream::stream() noexcept = default;

stream::stream(connection&& established) {
  if (!detail::internal_access::impl(established))
    return; // never open: so is the stream
  impl_ = std::make_shared<detail::stream_impl>(std::move(established));
  ex_ = impl_->io();
}
stream::stream(stream&&) noexcept = default;
stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
    ex_ = std::move(other.ex_);
  }
  return *this;
}
stream::~stream() { close(); }

const connection& stream::underlying_connection() const noexcept {
  static const connection none;
  return impl_ ? impl_->conn() : none;
}
bool stream::is_open() const noexcept { return impl_ && impl_->conn().is_open(); }
void stream::close() noexcept {
  if (impl_)
    impl_->close();
}

} // namespace asio_rdma
