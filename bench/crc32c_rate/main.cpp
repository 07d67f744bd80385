// crc32c_rate: how fast the file transfer's CRC-32C runs on this machine.
//
//   crc32c_rate [MEBIBYTES] [ROUNDS]      (default 256 MiB, 5 rounds)
//
// Checksums a buffer of MEBIBYTES in 1 MiB pieces (the default chunk size of
// the file transfer), ROUNDS times, and prints the best rate in GB/s
// (10^9 bytes per second) and the CRC (the same every round).
#include "file_transfer/protocol.hpp" // lib/: the library's internal CRC-32C

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  std::size_t mebibytes = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (mebibytes == 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: crc32c_rate [MEBIBYTES] [ROUNDS]\n");
    return 2;
  }
  constexpr std::size_t piece = 1 << 20;
  std::vector<std::byte> data(mebibytes * piece);
  std::mt19937_64 random(42);
  for (auto& b : data)
    b = static_cast<std::byte>(random());

  double best = 0;
  std::uint32_t crc = 0;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    crc = 0;
    for (std::size_t off = 0; off < data.size(); off += piece)
      crc = asio_rdma::detail::file_protocol::crc32c(crc, std::span(data).subspan(off, piece));
    std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    best = std::max(best, static_cast<double>(data.size()) / seconds.count() / 1e9);
  }
  std::printf("crc32c: %zu MiB, best of %d rounds: %.2f GB/s (crc %08x)\n", mebibytes, rounds, best,
              crc);
}
