// Raw verbs plumbing for the baseline: one connection's verbs objects, owned
// together, and the blocking rdma_cm steps both sides need.
#pragma once

#include "wire.hpp"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rdma_bench::raw {

/// Throws std::runtime_error with `what` and strerror(errno) (verbs report
/// failures through errno, or as a returned errno value: pass it as `err`).
[[noreturn]] void fail(const std::string& what, int err = 0);

/// Waits for the next event on `channel` and checks that it is `expected`
/// (else throws, naming both). The caller acks the returned event.
rdma_cm_event* expect_event(rdma_event_channel* channel, rdma_cm_event_type expected);

/// The verbs objects of one side of one test, destroyed in reverse order.
class endpoint {
public:
  endpoint() = default;
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  ~endpoint();

  /// Creates PD, CQ (with a completion channel when `events`), RC QP on `id`
  /// and `buffer_size` bytes of registered memory (all access rights).
  void create(rdma_cm_id* id, const test_parameters& t, std::uint32_t receive_depth,
              std::size_t buffer_size, bool events);

  /// Polls up to `n` completions; in event mode blocks on the completion
  /// channel when none is there (re-arming before the final poll).
  int poll(ibv_wc* wc, int n);
  /// Checks a completion; throws with the status text on failure.
  static void check(const ibv_wc& wc);

  /// Posts `count` receives of `size` bytes on slots first, first+1, ... (mod slots).
  void post_receives(std::uint32_t first, std::uint32_t count, std::size_t size,
                     std::uint32_t slots);

  buffer_description describe() const;

  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* events = nullptr;
  ibv_cq* cq = nullptr;
  bool qp = false;
  std::byte* buffer = nullptr;
  std::size_t buffer_size = 0;
  ibv_mr* mr = nullptr;
  std::uint32_t inline_limit = 0;
  unsigned unacked_events = 0;
};

} // namespace rdma_bench::raw
