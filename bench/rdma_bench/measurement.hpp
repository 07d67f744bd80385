// rdma_bench: the measuring window shared by the framework's and the raw
// verbs' loops: warm-up, then a duration or an iteration count, with
// progress lines on long runs.
#pragma once

#include "results.hpp"
#include "wire.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace rdma_bench {

class measurement {
public:
  using clock = std::chrono::steady_clock;

  measurement(const settings& s, std::size_t size) : settings_(s), size_(size) {
    result_.size = size;
    if (s.mode == test_mode::latency)
      result_.latencies_us.reserve(s.iterations ? s.iterations : 1 << 16);
  }

  /// Starts the clock (warm-up begins).
  void begin() {
    start_ = clock::now();
    measure_from_ = start_ + to_duration(settings_.warmup);
    if (settings_.warmup <= 0)
      start_measuring(start_);
  }

  /// Called for every completed operation (or message received); `now` is
  /// read by the caller at most once per batch.
  void completed(std::uint64_t count, clock::time_point now) {
    completed_ += count;
    if (!measuring_) {
      if (now >= measure_from_)
        start_measuring(now);
      return;
    }
    if (settings_.iterations ? completed_ - base_ >= settings_.iterations : now >= stop_at_)
      finish(now);
    else if (now >= next_progress_)
      progress(now);
  }

  /// A latency sample (one-way or round trip, as the test defines it).
  void sample(double microseconds) {
    if (measuring_ && !done_)
      result_.latencies_us.push_back(microseconds);
  }

  /// Time checks when nothing completes (the framework's timer calls this).
  void tick(clock::time_point now) { completed(0, now); }

  bool measuring() const { return measuring_; }
  bool done() const { return done_; }
  /// Stops early (an error): the result covers what was measured.
  void abort(clock::time_point now) {
    if (!done_)
      finish(now);
  }
  result take() {
    result_.finish();
    return std::move(result_);
  }

private:
  static clock::duration to_duration(double seconds) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  }

  void start_measuring(clock::time_point now) {
    measuring_ = true;
    base_ = completed_;
    measured_from_ = now;
    stop_at_ = now + to_duration(settings_.duration);
    next_progress_ = now + std::chrono::seconds(1);
  }

  void finish(clock::time_point now) {
    done_ = true;
    result_.iterations = measuring_ ? completed_ - base_ : 0;
    result_.seconds = measuring_ ? std::chrono::duration<double>(now - measured_from_).count() : 0;
  }

  void progress(clock::time_point now) {
    next_progress_ = now + std::chrono::seconds(1);
    if (settings_.quiet || settings_.duration < 5)
      return;
    double seconds = std::chrono::duration<double>(now - measured_from_).count();
    double messages = double(completed_ - base_);
    std::fprintf(stderr, "rdma_bench: %zu bytes, %.0f s: %.0f ops, %.4f Gb/s\n", size_, seconds,
                 messages, messages * size_ * 8 / seconds / 1e9);
  }

  const settings& settings_;
  std::size_t size_;
  result result_;
  std::uint64_t completed_ = 0;
  std::uint64_t base_ = 0;
  bool measuring_ = false;
  bool done_ = false;
  clock::time_point start_, measure_from_, measured_from_, stop_at_, next_progress_;
};

/// The parameters a client sends for one size.
inline test_parameters parameters_for(const settings& s, std::size_t size) {
  test_parameters t;
  t.op = s.op;
  t.mode = s.mode;
  t.bidirectional = s.bidirectional;
  t.event_completion = s.completion == completion_mode::event;
  t.adaptive_completion = s.completion == completion_mode::adaptive;
  t.post_answers = s.lat_post_send;
  t.acknowledged_sends = s.acknowledged_sends;
  t.copied_sends = s.copied_sends;
  t.asio_floor = s.asio_floor;
  t.depth = static_cast<std::uint16_t>(s.depth);
  t.size = static_cast<std::uint32_t>(size);
  t.inline_size = s.inline_size;
  t.adaptive_spin_us = s.adaptive_spin_us;
  return t;
}

} // namespace rdma_bench
