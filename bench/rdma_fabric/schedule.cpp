#include "schedule.hpp"

#include <algorithm>

namespace rdma_fabric {

std::vector<pair_round> tournament(int ranks) {
  std::vector<pair_round> rounds;
  if (ranks < 2)
    return rounds;
  // An odd count gets a phantom rank; whoever meets it sits the round out.
  const int seats = ranks % 2 == 0 ? ranks : ranks + 1;
  std::vector<int> circle(seats);
  for (int i = 0; i < seats; ++i)
    circle[i] = i;
  for (int r = 0; r < seats - 1; ++r) {
    pair_round pairs;
    for (int i = 0; i < seats / 2; ++i) {
      int a = circle[i], b = circle[seats - 1 - i];
      if (a >= ranks || b >= ranks)
        continue;
      pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(pairs.begin(), pairs.end());
    rounds.push_back(std::move(pairs));
    // Seat 0 stays; the others turn one seat.
    std::rotate(circle.begin() + 1, circle.end() - 1, circle.end());
  }
  return rounds;
}

} // namespace rdma_fabric
