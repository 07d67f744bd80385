// The calls a client waits for, by id (sans-I/O; unit-tested with a plain Call).
//
// A call id is its slot's index in the low 32 bits and the slot's generation (from 1) in
// the high ones: finding a call is an index, never a map lookup, and an id whose slot has
// been released and reused (a reply that comes after the call was cancelled or timed out,
// a cancel after the reply) finds nothing instead of another call. Slots are reused, so
// once the table has grown to the most calls ever in flight it allocates no more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace asio_rdma::rpc::detail {

/// `Call` has public members `std::uint32_t generation` (starting at 1) and `bool in_use`.
template <typename Call> class call_table {
public:
  /// A free slot, marked in use (made with `make()` when none is free), and its id.
  template <typename Make> std::pair<std::uint64_t, Call*> acquire(Make&& make) {
    std::uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<std::uint32_t>(slots_.size());
      slots_.push_back(make());
      slots_.back().generation = 1;
      free_.reserve(slots_.size()); // release() then never allocates
    }
    Call& c = slots_[index];
    c.in_use = true;
    ++in_use_;
    return {id_of(index, c.generation), &c};
  }

  /// The call in use with this id, or nullptr (an unknown, stale or malformed id).
  Call* find(std::uint64_t id) noexcept {
    const auto index = static_cast<std::uint32_t>(id);
    if (index >= slots_.size())
      return nullptr;
    Call& c = slots_[index];
    return c.in_use && c.generation == static_cast<std::uint32_t>(id >> 32) ? &c : nullptr;
  }

  /// Frees the slot of `id` (in use): its generation moves on, so the id finds nothing.
  void release(std::uint64_t id) noexcept {
    const auto index = static_cast<std::uint32_t>(id);
    Call& c = slots_[index];
    c.in_use = false;
    if (++c.generation == 0)
      c.generation = 1;
    --in_use_;
    free_.push_back(index);
  }

  /// Calls in use.
  std::size_t in_use() const noexcept { return in_use_; }
  /// Slots made so far (the most calls ever in flight at once).
  std::size_t capacity() const noexcept { return slots_.size(); }

  /// Calls f(id, call) for each call in use (f may release it).
  template <typename F> void for_each_in_use(F&& f) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].in_use)
        f(id_of(i, slots_[i].generation), slots_[i]);
  }

  static std::uint64_t id_of(std::uint32_t index, std::uint32_t generation) noexcept {
    return (static_cast<std::uint64_t>(generation) << 32) | index;
  }

private:
  std::deque<Call> slots_; // a deque: growing keeps the addresses of calls in flight
  std::vector<std::uint32_t> free_;
  std::size_t in_use_ = 0;
};

} // namespace asio_rdma::rpc::detail
