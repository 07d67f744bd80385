// What an initiation captures of a buffer sequence (one buffer by value, or a
// bounded array copy), so operation bodies can live in lib/ as non-template
// code without allocating, and the view of it those bodies take.
#pragma once

#include <boost/asio/buffer.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>

namespace asio_rdma::detail {

/// The captured buffers, as the non-template operation bodies take them.
template <typename Buffer> struct buffer_view {
  const Buffer* buffers = nullptr;
  std::size_t count = 0; // non-empty buffers
  std::size_t total_size = 0;
  /// The sequence had more than buffer_array::max_buffers non-empty buffers.
  bool too_many = false;
};

template <typename Buffer> struct buffer_array {
  /// The most buffers one operation takes (like an iovec limit).
  static constexpr std::size_t max_buffers = 16;
  std::array<Buffer, max_buffers> buffers{};
  std::size_t count = 0;
  std::size_t total_size = 0;
  /// The sequence had more than max_buffers non-empty buffers.
  bool too_many = false;

  buffer_view<Buffer> view() const { return {buffers.data(), count, total_size, too_many}; }
  /// Copies the view's buffers in (only those: the array is 16 entries).
  void assign(const buffer_view<Buffer>& v) {
    std::copy_n(v.buffers, std::min(v.count, max_buffers), buffers.begin());
    count = std::min(v.count, max_buffers);
    total_size = v.total_size;
    too_many = v.too_many;
  }
};

/// One buffer captured by value: the common case, 16 bytes to carry through
/// an initiation (a deferred or awaitable operation stores its arguments)
/// instead of a 280-byte array.
template <typename Buffer> struct single_buffer {
  Buffer buffer;
  buffer_view<Buffer> view() const {
    return {&buffer, buffer.size() == 0 ? 0u : 1u, buffer.size(), false};
  }
};

using const_buffer_array = buffer_array<boost::asio::const_buffer>;
using mutable_buffer_array = buffer_array<boost::asio::mutable_buffer>;

template <typename Buffer, typename Sequence>
buffer_array<Buffer> make_buffer_array(const Sequence& sequence) {
  buffer_array<Buffer> result;
  for (auto it = boost::asio::buffer_sequence_begin(sequence);
       it != boost::asio::buffer_sequence_end(sequence); ++it) {
    Buffer b(*it);
    if (b.size() == 0)
      continue;
    if (result.count == result.max_buffers) {
      result.too_many = true;
      break;
    }
    result.buffers[result.count++] = b;
    result.total_size += b.size();
  }
  return result;
}

/// Captures `sequence` for an initiation: single_buffer when the sequence is
/// one buffer (asio::buffer(...)), else a buffer_array. Both have view().
template <typename Buffer, typename Sequence> auto capture_buffers(const Sequence& sequence) {
  if constexpr (std::is_convertible_v<const Sequence&, Buffer>)
    return single_buffer<Buffer>{Buffer(sequence)};
  else
    return make_buffer_array<Buffer>(sequence);
}

} // namespace asio_rdma::detail
