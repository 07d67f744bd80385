// What an initiation carries of a caller's list (a buffer sequence, or a work
// request's local buffers), so operation bodies can live in lib/ as
// non-template code without allocating, and the view of it those bodies take.
// One idea, one pair of names: captured_list (the copy) and list_view (the view).
#pragma once

#include <boost/asio/buffer.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>

namespace asio_rdma::detail {

/// A captured list as the non-template operation bodies take it.
template <typename T> struct list_view {
  const T* items = nullptr;
  std::size_t count = 0;
  /// The caller's list had more items than its capture holds (the operation fails).
  bool too_many = false;
};

/// A copy of at most N items of a caller's list, carried by value in an initiation: a
/// deferred or awaitable operation stores its arguments, and the caller's list may be gone
/// when it starts.
template <typename T, std::size_t N> struct captured_list {
  static constexpr std::size_t max_items = N;
  std::array<T, N> items{};
  std::size_t count = 0;
  bool too_many = false;

  void push_back(const T& item) noexcept {
    if (count == N)
      too_many = true;
    else
      items[count++] = item;
  }
  list_view<T> view() const noexcept { return {items.data(), count, too_many}; }
};

/// Captured buffers as the operation bodies take them: the non-empty buffers and their
/// total size.
template <typename Buffer> struct buffer_view : list_view<Buffer> {
  std::size_t total_size = 0;
};

/// The most buffers one operation takes (like an iovec limit).
inline constexpr std::size_t max_buffers = 16;

template <typename Buffer> struct buffer_array : captured_list<Buffer, max_buffers> {
  std::size_t total_size = 0;

  void push_back(const Buffer& b) noexcept {
    captured_list<Buffer, max_buffers>::push_back(b);
    if (!this->too_many)
      total_size += b.size();
  }
  buffer_view<Buffer> view() const noexcept {
    return {{this->items.data(), this->count, this->too_many}, total_size};
  }
  /// Copies the view's buffers in (only those: the array holds max_buffers).
  void assign(const buffer_view<Buffer>& v) noexcept {
    this->count = std::min(v.count, max_buffers);
    std::copy_n(v.items, this->count, this->items.begin());
    total_size = v.total_size;
    this->too_many = v.too_many;
  }
};

/// One buffer captured by value: the common case, 16 bytes to carry through
/// an initiation instead of a 280-byte array.
template <typename Buffer> struct single_buffer {
  Buffer buffer;
  buffer_view<Buffer> view() const noexcept {
    return {{&buffer, buffer.size() == 0 ? 0u : 1u, false}, buffer.size()};
  }
};

using const_buffer_array = buffer_array<boost::asio::const_buffer>;
using mutable_buffer_array = buffer_array<boost::asio::mutable_buffer>;

template <typename Buffer, typename Sequence>
buffer_array<Buffer> make_buffer_array(const Sequence& sequence) {
  buffer_array<Buffer> result;
  for (auto it = boost::asio::buffer_sequence_begin(sequence);
       it != boost::asio::buffer_sequence_end(sequence) && !result.too_many; ++it) {
    Buffer b(*it);
    if (b.size() != 0)
      result.push_back(b);
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
