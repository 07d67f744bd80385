// The frames a connection reads (sans-I/O; unit-tested): one buffer that each read fills
// as far as the transport has bytes, from which headers are parsed and payloads copied
// until it runs dry. Many small frames cost one read between them; a payload longer than
// what is buffered is copied in part and its rest read straight into its destination.
#pragma once

#include "rpc/rpc_wire.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

namespace asio_rdma::rpc::detail {

class frame_reader {
public:
  /// Reads of at most `capacity` bytes (at least a header's).
  explicit frame_reader(std::size_t capacity = 64 * 1024)
      : buffer_(std::max(capacity, wire::header_size)) {}

  /// Where the next read puts its bytes: all of the buffer after what is still buffered,
  /// which moves to the front first. (A connection reads again only once it has taken
  /// every whole header and every payload byte buffered, so what moves is less than a
  /// header.)
  boost::asio::mutable_buffer space() noexcept {
    if (begin_ != 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return boost::asio::buffer(buffer_.data() + end_, buffer_.size() - end_);
  }
  /// `n` bytes were read into space().
  void commit(std::size_t n) noexcept { end_ += n; }

  /// Takes the next frame's header if all of it is buffered: true, and `h` is it (or `bad`
  /// says why it is malformed); false when more must be read first.
  bool next_header(wire::frame_header& h, boost::system::error_code& bad) noexcept {
    if (buffered() < wire::header_size)
      return false;
    bad = wire::parse(std::span<const std::byte, wire::header_size>(buffer_.data() + begin_,
                                                                   wire::header_size),
                      h);
    begin_ += wire::header_size;
    return true;
  }

  /// Moves up to `to.size()` buffered bytes into `to`; returns how many.
  std::size_t take(std::span<std::byte> to) noexcept {
    const std::size_t n = std::min(to.size(), buffered());
    if (n)
      std::memcpy(to.data(), buffer_.data() + begin_, n);
    begin_ += n;
    return n;
  }

  /// Drops up to `n` buffered bytes; returns how many.
  std::size_t skip(std::size_t n) noexcept {
    n = std::min(n, buffered());
    begin_ += n;
    return n;
  }

  std::size_t buffered() const noexcept { return end_ - begin_; }

private:
  std::vector<std::byte> buffer_;
  std::size_t begin_ = 0, end_ = 0; // the bytes read, not yet taken
};

} // namespace asio_rdma::rpc::detail
