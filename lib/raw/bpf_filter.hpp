// Flow rules -> classic BPF, for the AF_PACKET backend. Pure functions (tested against a
// reference matcher in test/raw).
#pragma once

#include <asio_rdma/flow_rule.hpp>

#include <linux/filter.h>

#include <cstdint>
#include <span>
#include <vector>

namespace asio_rdma::detail {

/// The most rules one program can hold: the longest rule compiles to
/// max_bpf_instructions_per_rule instructions and the kernel accepts at most BPF_MAXINSNS.
inline constexpr std::size_t max_bpf_instructions_per_rule = 40;
inline constexpr std::size_t max_bpf_rules = (BPF_MAXINSNS - 1) / max_bpf_instructions_per_rule;

/// Compiles the union of `rules` into a classic BPF socket filter that accepts a frame (returns
/// `snap_length`) when any rule matches and rejects it (returns 0) otherwise. The rules must be
/// normalized (asio_rdma::normalize). The program sees frames as an AF_PACKET socket does: an
/// 802.1Q tag is not in the data but in the kernel's metadata (SKF_AD_VLAN_TAG[_PRESENT]).
/// Every rule checks the frame length before loading a field, so a frame too short for one rule
/// can still match the next (a failed BPF load would reject the frame outright). An empty
/// `rules` yields the reject-all program.
std::vector<sock_filter> compile_flow_filter(std::span<const flow_rule> rules,
                                             std::uint32_t snap_length);

/// The one-instruction program that rejects every frame.
std::vector<sock_filter> reject_all_filter();

} // namespace asio_rdma::detail
