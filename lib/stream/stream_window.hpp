// The stream protocol's bookkeeping without a device (sans-I/O, unit-tested like
// send_window): where a writer's bytes go in its send buffer and in the peer's ring, how
// much room the peer's credit leaves, and on the reading side which ring bytes have
// arrived and when to hand credit back. docs/stream.md describes the protocol.
//
// Every position is a cumulative byte count (64 bits: it does not wrap in practice); a
// ring offset is a count modulo the ring's size. Both ends count the same bytes, so a
// notification carries only a length: the reader knows where the bytes are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace asio_rdma::detail {

/// The writing side: bytes copied into the send buffer, posted to the peer's ring,
/// completed (the send buffer's copy is free again) and credited (the peer's reader has
/// consumed them, so their place in its ring is free again).
class stream_writer_window {
public:
  /// One RDMA write: `length` bytes from the send buffer's `local_offset` to the peer's
  /// ring at `remote_offset`, contiguous in both.
  struct post {
    std::size_t local_offset = 0;
    std::size_t remote_offset = 0;
    std::size_t length = 0;
  };

  explicit stream_writer_window(std::size_t send_buffer_size) noexcept
      : send_size_(send_buffer_size) {}

  std::size_t send_buffer_size() const noexcept { return send_size_; }

  /// The peer's ring is known (its advertisement arrived): writing may begin.
  void set_peer_ring(std::size_t size) noexcept { peer_size_ = size; }
  bool peer_known() const noexcept { return peer_size_ != 0; }

  /// Bytes a write may copy into the send buffer now: free in the send buffer and in the
  /// peer's ring (0 until the peer's ring is known). A write waits while this is 0.
  std::size_t room() const noexcept {
    const std::size_t send_free = send_size_ - static_cast<std::size_t>(copied_ - completed_);
    const std::size_t ring_free = peer_size_ - static_cast<std::size_t>(copied_ - credited_);
    return std::min(send_free, ring_free);
  }
  /// Where the next copied byte goes in the send buffer.
  std::size_t copy_offset() const noexcept { return copied_ % send_size_; }
  /// `n` (at most room()) bytes were copied in.
  void copied(std::size_t n) noexcept { copied_ += n; }

  /// The next RDMA write of copied bytes not yet posted, at most `max_length` bytes, cut
  /// where the send buffer or the peer's ring wraps. Length 0: nothing to post.
  post next_post(std::size_t max_length) const noexcept {
    post p;
    if (!peer_known())
      return p;
    p.local_offset = posted_ % send_size_;
    p.remote_offset = posted_ % peer_size_;
    p.length = std::min({static_cast<std::size_t>(copied_ - posted_), max_length,
                         send_size_ - p.local_offset, peer_size_ - p.remote_offset});
    return p;
  }
  void posted(std::size_t n) noexcept { posted_ += n; }
  /// A posted write of `n` bytes completed (writes complete in the order posted).
  void completed(std::size_t n) noexcept { completed_ += n; }
  /// The peer's reader returned `n` bytes of its ring. False if that is more than was
  /// posted and not yet credited: the peer broke the protocol.
  bool credit(std::size_t n) noexcept {
    if (n == 0 || n > posted_ - credited_)
      return false;
    credited_ += n;
    return true;
  }

  /// Every copied byte has been posted.
  bool all_posted() const noexcept { return posted_ == copied_; }
  /// Bytes copied and not yet posted.
  std::size_t unposted() const noexcept { return static_cast<std::size_t>(copied_ - posted_); }

private:
  std::size_t send_size_;
  std::size_t peer_size_ = 0;
  std::uint64_t copied_ = 0;
  std::uint64_t posted_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t credited_ = 0;
};

/// The reading side: bytes the peer wrote into this ring (arrived), read by the
/// application (consumed), and handed back to the peer as credit (returned).
class stream_reader_window {
public:
  explicit stream_reader_window(std::size_t ring_size) noexcept : size_(ring_size) {}

  std::size_t ring_size() const noexcept { return size_; }

  /// The peer says `n` more bytes are in the ring. False if that overflows what the ring
  /// has free (the peer wrote past its credit) or is empty: the peer broke the protocol.
  bool arrived(std::size_t n) noexcept {
    if (n == 0 || n > size_ - available())
      return false;
    arrived_ += n;
    return true;
  }
  /// Bytes arrived and not yet read.
  std::size_t available() const noexcept { return static_cast<std::size_t>(arrived_ - consumed_); }
  /// Where the next unread byte is, and how many follow it before the ring wraps.
  std::size_t read_offset() const noexcept { return consumed_ % size_; }
  std::size_t contiguous() const noexcept { return std::min(available(), size_ - read_offset()); }
  /// `n` (at most available()) bytes were read.
  void consumed(std::size_t n) noexcept { consumed_ += n; }

  /// Credit to hand back now: the bytes read and not yet returned, once they reach a
  /// quarter of the ring (fewer messages; the writer still has three quarters to fill
  /// meanwhile, so it never waits on credit the reader holds back). 0: not yet.
  std::size_t credit_due() const noexcept {
    const auto held = static_cast<std::size_t>(consumed_ - returned_);
    return held >= size_ / 4 ? held : 0;
  }
  void credit_sent(std::size_t n) noexcept { returned_ += n; }

private:
  std::size_t size_;
  std::uint64_t arrived_ = 0;
  std::uint64_t consumed_ = 0;
  std::uint64_t returned_ = 0;
};

} // namespace asio_rdma::detail
