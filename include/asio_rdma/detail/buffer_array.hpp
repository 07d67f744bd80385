// A fixed-size copy of a buffer sequence, so operation bodies can live in
// lib/ as non-template code without allocating.
#pragma once

#include <boost/asio/buffer.hpp>

#include <array>
#include <cstddef>

namespace asio_rdma::detail {

template <typename Buffer> struct buffer_array {
  /// The most buffers one operation takes (like an iovec limit).
  static constexpr std::size_t max_buffers = 16;
  std::array<Buffer, max_buffers> buffers{};
  std::size_t count = 0;
  std::size_t total_size = 0;
  /// The sequence had more than max_buffers non-empty buffers.
  bool too_many = false;
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

} // namespace asio_rdma::detail
