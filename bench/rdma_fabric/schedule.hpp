// rdma_fabric: which pairs of ranks measure at the same time. A round-robin
// tournament (circle method): every pair exactly once, each round a set of
// disjoint pairs, so that a link is measured while no other pair shares
// either of its ends.
#pragma once

#include <utility>
#include <vector>

namespace rdma_fabric {

/// One round: disjoint pairs (a, b) with a < b.
using pair_round = std::vector<std::pair<int, int>>;

/// The rounds for `ranks` ranks (>= 2): ranks - 1 rounds of ranks / 2 pairs
/// when `ranks` is even; `ranks` rounds with one rank sitting out each when
/// it is odd. Empty for fewer than 2 ranks.
std::vector<pair_round> tournament(int ranks);

} // namespace rdma_fabric
