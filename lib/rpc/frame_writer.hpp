// The frames waiting to be written on one connection, in order, and the batch being
// written (sans-I/O: the owner starts the write). Frames queued while a write is in
// progress go out together in the next one, up to max_batch frames in one gather write:
// many calls in flight cost one write (one syscall, or one RDMA write) per batch.
#pragma once

#include "rpc/rpc_wire.hpp"

#include <boost/asio/buffer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace asio_rdma::rpc::detail {

/// A frame owned by its call: its header and payload live until it is written.
struct outgoing_frame {
  enum class place : std::uint8_t { none, queued, writing };
  wire::header_bytes header{};
  boost::asio::const_buffer payload;
  boost::asio::const_buffer trailer; // more payload after it (a reply buffer's descriptor)
  outgoing_frame* next = nullptr;
  place where = place::none;
  /// Its owner (a client's or a server's call), reached with no lookup when written. An
  /// owner outlives its frame's stay in the writer: neither side frees or reuses a call
  /// while its frame is queued or being written.
  void* owner = nullptr;
};

class frame_writer {
public:
  static constexpr std::size_t max_batch = 32;

  /// Appends `f` (not queued or being written) to the queue.
  void push(outgoing_frame& f) noexcept {
    f.next = nullptr;
    f.where = outgoing_frame::place::queued;
    if (tail_)
      tail_->next = &f;
    else
      head_ = &f;
    tail_ = &f;
  }

  /// Takes `f` out of the queue if it waits there (it is not written then): true if so.
  bool withdraw(outgoing_frame& f) noexcept {
    if (f.where != outgoing_frame::place::queued)
      return false;
    outgoing_frame* prev = nullptr;
    for (auto* p = head_; p; prev = p, p = p->next) {
      if (p != &f)
        continue;
      (prev ? prev->next : head_) = p->next;
      if (tail_ == p)
        tail_ = prev;
      f.next = nullptr;
      f.where = outgoing_frame::place::none;
      return true;
    }
    return false;
  }

  /// True while a batch is being written.
  bool writing() const noexcept { return batch_ != nullptr; }
  /// True if frames wait for the next write.
  bool has_queued() const noexcept { return head_ != nullptr; }

  /// Moves up to max_batch queued frames into the batch and returns its buffers. Only when
  /// !writing() && has_queued().
  std::span<const boost::asio::const_buffer> start_batch() noexcept {
    std::size_t n = 0, frames = 0;
    batch_ = head_;
    outgoing_frame* last = nullptr;
    while (head_ && frames < max_batch) {
      outgoing_frame* f = head_;
      f->where = outgoing_frame::place::writing;
      buffers_[n++] = boost::asio::buffer(f->header);
      if (f->payload.size() != 0)
        buffers_[n++] = f->payload;
      if (f->trailer.size() != 0)
        buffers_[n++] = f->trailer;
      last = f;
      head_ = f->next;
      ++frames;
    }
    last->next = nullptr;
    if (!head_)
      tail_ = nullptr;
    return {buffers_.data(), n};
  }

  /// Ends the batch (its write completed): returns its frames, linked by `next`, each
  /// no longer anywhere (the caller may queue it again: read `next` before).
  outgoing_frame* finish_batch() noexcept {
    outgoing_frame* first = batch_;
    batch_ = nullptr;
    for (auto* f = first; f; f = f->next)
      f->where = outgoing_frame::place::none;
    return first;
  }

  /// Empties the queue (the connection is gone): returns its frames as finish_batch does.
  outgoing_frame* drop_queued() noexcept {
    outgoing_frame* first = head_;
    head_ = tail_ = nullptr;
    for (auto* f = first; f; f = f->next)
      f->where = outgoing_frame::place::none;
    return first;
  }

private:
  outgoing_frame* head_ = nullptr;
  outgoing_frame* tail_ = nullptr;
  outgoing_frame* batch_ = nullptr;
  std::array<boost::asio::const_buffer, 3 * max_batch> buffers_;
};

} // namespace asio_rdma::rpc::detail
