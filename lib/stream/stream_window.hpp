// The stream protocol's bookkeeping without a device (sans-I/O, unit-tested like
// send_window): where a writer's bytes go in its send buffer and in the peer's ring, how
// much room the peer's credit leaves, and on the reading side which ring bytes have
// arrived and when to hand credit back. A writer's bytes travel as its RDMA write or as
// the reader's RDMA read (a pull); both land where the next bytes go. docs/stream.md
// describes the protocol.
//
// Every position is a cumulative byte count (64 bits: it does not wrap in practice); a
// ring offset is a count modulo the ring's size. Both ends count the same bytes, so a
// notification carries only a length: the reader knows where the bytes are.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace asio_rdma::detail {

/// The writing side: bytes copied into the send buffer, posted to the peer's ring,
/// completed (the send buffer's copy is free again) and credited (the peer's reader has
/// consumed them, so their place in its ring is free again). A post is an RDMA write of
/// this side's, complete when it completes, or bytes left for the peer to pull, complete
/// when the peer says it read them; the send buffer is free again in the order posted.
class stream_writer_window {
public:
  /// The most posts in flight at once (the caller waits for in_flight() to drop below).
  static constexpr std::size_t max_in_flight = 4;
  enum class by : std::uint8_t { write, pull };

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
  /// `n` bytes of next_post() are on their way, `how`; in_flight() < max_in_flight.
  void posted(std::size_t n, by how = by::write) noexcept {
    flight_[(first_ + count_++) % max_in_flight] = in_flight_post{n, how, false};
    posted_ += n;
  }
  std::size_t in_flight() const noexcept { return count_; }
  /// Posts left for the peer to pull that it has not yet said it read. The end of data
  /// waits for them: until then the bytes are only in this side's send buffer.
  bool pulls_pending() const noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
      const in_flight_post& p = flight_[(first_ + i) % max_in_flight];
      if (p.how == by::pull && !p.done)
        return true;
    }
    return false;
  }
  /// The oldest of this side's RDMA writes in flight completed (they complete in order).
  void write_completed() noexcept { finish(by::write); }
  /// The peer read `n` bytes left for it. False unless the oldest pull in flight is
  /// `n` bytes: the peer broke the protocol.
  bool pulled(std::size_t n) noexcept {
    const in_flight_post* p = oldest(by::pull);
    if (!p || p->length != n)
      return false;
    finish(by::pull);
    return true;
  }
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
  struct in_flight_post {
    std::size_t length = 0;
    by how = by::write;
    bool done = false;
  };
  in_flight_post* oldest(by how) noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
      in_flight_post& p = flight_[(first_ + i) % max_in_flight];
      if (p.how == how && !p.done)
        return &p;
    }
    return nullptr;
  }
  /// Marks the oldest post `how` done, then frees the send buffer of the done ones first.
  void finish(by how) noexcept {
    if (in_flight_post* p = oldest(how))
      p->done = true;
    while (count_ > 0 && flight_[first_].done) {
      completed_ += flight_[first_].length;
      first_ = (first_ + 1) % max_in_flight;
      --count_;
    }
  }

  std::size_t send_size_;
  std::size_t peer_size_ = 0;
  std::array<in_flight_post, max_in_flight> flight_{};
  std::size_t first_ = 0;
  std::size_t count_ = 0;
  std::uint64_t copied_ = 0;
  std::uint64_t posted_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t credited_ = 0;
};

/// The reading side: bytes the peer announced in this ring (written there, or left in its
/// send buffer for this side to pull), arrived (readable: every byte before them is here),
/// read by the application (consumed), and handed back to the peer as credit (returned).
class stream_reader_window {
public:
  explicit stream_reader_window(std::size_t ring_size) noexcept : size_(ring_size) {}

  std::size_t ring_size() const noexcept { return size_; }
  /// The peer's send buffer is this size (0: it never leaves bytes to pull).
  void set_peer_send_buffer(std::size_t size) noexcept { peer_send_size_ = size; }

  /// The peer RDMA-wrote `n` more bytes into the ring. False if that overflows what the
  /// ring has free (the peer wrote past its credit) or is empty: the peer broke the protocol.
  bool arrived(std::size_t n) noexcept {
    if (n == 0 || n > size_ - held())
      return false;
    announced_ += n;
    return true;
  }
  /// The peer left `n` more bytes to pull. False if they overflow the ring, cross the end
  /// of the ring or of the peer's send buffer (a writer cuts its posts there), or are one
  /// pull too many, or the peer has no send buffer to pull from: the peer broke the
  /// protocol. Else the read to post: pull_source() and pull_target() of these bytes.
  bool offered(std::size_t n) noexcept {
    if (n == 0 || n > size_ - held() || pulls_ == pull_starts_.size() || peer_send_size_ == 0 ||
        announced_ % size_ + n > size_ || announced_ % peer_send_size_ + n > peer_send_size_)
      return false;
    pull_starts_[(first_pull_ + pulls_++) % pull_starts_.size()] = announced_;
    announced_ += n;
    return true;
  }
  /// Where the bytes offered last are, in the peer's send buffer and in the ring.
  std::size_t pull_source(std::size_t n) const noexcept { return (announced_ - n) % peer_send_size_; }
  std::size_t pull_target(std::size_t n) const noexcept { return (announced_ - n) % size_; }
  /// The oldest pull landed (pulls land in the order posted): its bytes, and those
  /// written after them up to the next pull, are readable.
  void pull_landed() noexcept {
    first_pull_ = (first_pull_ + 1) % pull_starts_.size();
    --pulls_;
  }
  std::size_t pulls_in_flight() const noexcept { return pulls_; }

  /// Bytes arrived and not yet read.
  std::size_t available() const noexcept {
    const std::uint64_t arrived = pulls_ ? pull_starts_[first_pull_] : announced_;
    return static_cast<std::size_t>(arrived - consumed_);
  }
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
  /// Ring bytes announced and not yet read: those the peer may not overwrite.
  std::size_t held() const noexcept { return static_cast<std::size_t>(announced_ - consumed_); }

  std::size_t size_;
  std::size_t peer_send_size_ = 0;
  std::uint64_t announced_ = 0;
  std::uint64_t consumed_ = 0;
  std::uint64_t returned_ = 0;
  /// Where each pull in flight starts (a reader takes as many as a writer posts).
  std::array<std::uint64_t, stream_writer_window::max_in_flight> pull_starts_{};
  std::size_t first_pull_ = 0;
  std::size_t pulls_ = 0;
};

} // namespace asio_rdma::detail
