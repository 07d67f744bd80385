// A call's completion, as its caller asked for the reply: as a new vector
// (void(error_code, std::vector<std::byte>)), or read into the caller's own buffer
// (void(error_code, std::size_t)), which costs no allocation.
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/rpc/options.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

namespace asio_rdma::rpc::detail {

using reply_operation =
    asio_rdma::detail::pending_operation<void(boost::system::error_code, std::vector<std::byte>)>;
using sized_reply_operation =
    asio_rdma::detail::pending_operation<void(boost::system::error_code, std::size_t)>;

class call_completion {
public:
  call_completion() noexcept = default;
  call_completion(reply_operation&& op) noexcept : owned_(std::move(op)) {}
  call_completion(sized_reply_operation&& op, boost::asio::mutable_buffer into,
                  bool expose = false) noexcept
      : sized_(std::move(op)), into_(into), in_callers_buffer_(true), expose_(expose) {}

  /// True while the caller waits.
  explicit operator bool() const noexcept {
    return in_callers_buffer_ ? static_cast<bool>(sized_) : static_cast<bool>(owned_);
  }
  /// The reply goes into the caller's buffer, `into()`.
  bool in_callers_buffer() const noexcept { return in_callers_buffer_; }
  boost::asio::mutable_buffer into() const noexcept { return into_; }
  /// The caller asked for its buffer to be exposed to the server's writes
  /// (call_options::expose_reply_buffer).
  bool expose() const noexcept { return expose_; }
  /// Memory the caller registered for the request and the reply buffer
  /// (call_options::request_memory, reply_memory), or null.
  const memory_region* request_memory() const noexcept { return request_memory_; }
  const memory_region* reply_memory() const noexcept { return reply_memory_; }
  /// Takes those of `o`.
  call_completion&& with_memory_of(const call_options& o) && noexcept {
    request_memory_ = o.request_memory;
    reply_memory_ = o.reply_memory;
    return std::move(*this);
  }

  /// The longest reply taken: `limit`, or less if the caller's buffer is smaller.
  std::size_t room(std::size_t limit) const noexcept {
    return in_callers_buffer_ ? std::min(limit, into_.size()) : limit;
  }
  /// Where a reply of `length` bytes (at most room()) is read: the caller's buffer, or
  /// `own`, resized.
  std::span<std::byte> destination(std::size_t length, std::vector<std::byte>& own) {
    if (in_callers_buffer_)
      return {static_cast<std::byte*>(into_.data()), length};
    own.resize(length);
    return own;
  }

  template <typename Canceller> void on_cancel(Canceller&& c) {
    if (in_callers_buffer_)
      sized_.on_cancel(std::forward<Canceller>(c));
    else
      owned_.on_cancel(std::forward<Canceller>(c));
  }

  /// Completes the call with `ec` and no bytes.
  void fail(const boost::asio::any_io_executor& ex, asio_rdma::detail::from origin,
            const boost::system::error_code& ec) {
    complete(ex, origin, ec, std::vector<std::byte>(), 0);
  }
  /// Completes it with `ec` and the bytes that came: a reply of `length` bytes in
  /// destination(), or the server's message in `own` (copied into the caller's buffer
  /// as far as it fits).
  void deliver(const boost::asio::any_io_executor& ex, asio_rdma::detail::from origin,
               const boost::system::error_code& ec, std::vector<std::byte>& own,
               std::size_t length) {
    if (!in_callers_buffer_) {
      std::vector<std::byte> bytes;
      bytes.swap(own);
      return complete(ex, origin, ec, std::move(bytes), 0);
    }
    if (ec) { // the message
      length = std::min(own.size(), into_.size());
      if (length)
        std::memcpy(into_.data(), own.data(), length);
    }
    complete(ex, origin, ec, std::vector<std::byte>(), length);
  }
  /// Completes it with what the caller's kind of completion carries: `bytes`, or `length`
  /// bytes in its buffer.
  void complete(const boost::asio::any_io_executor& ex, asio_rdma::detail::from origin,
                const boost::system::error_code& ec, std::vector<std::byte>&& bytes,
                std::size_t length) {
    if (in_callers_buffer_)
      sized_.complete(ex, origin, ec, length);
    else
      owned_.complete(ex, origin, ec, std::move(bytes));
  }

private:
  reply_operation owned_;
  sized_reply_operation sized_;
  boost::asio::mutable_buffer into_;
  bool in_callers_buffer_ = false;
  bool expose_ = false;
  const memory_region* request_memory_ = nullptr;
  const memory_region* reply_memory_ = nullptr;
};

} // namespace asio_rdma::rpc::detail
