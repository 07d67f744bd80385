// rdma_cp send's progress on stderr: a bar with rate and ETA redrawn in place
// on a terminal, plain periodic lines otherwise (a log, a pipe, CI).
#pragma once

#include <asio_rdma/file_transfer.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace rdma_cp {

class progress_display {
public:
  enum class style { bar, lines, none };

  /// `total`: the bytes of everything the program sends (all its paths).
  progress_display(style s, std::uint64_t total, std::FILE* out = stderr);
  /// A terminal gets the bar, anything else the lines.
  static style for_stream(std::FILE* out);

  /// The interval the library should report progress at for this style.
  std::chrono::milliseconds interval() const noexcept;
  /// Progress of one send operation; `before` are the bytes the earlier
  /// operations of this program completed.
  void update(const asio_rdma::transfer_progress& p, std::uint64_t before);
  /// Ends the bar's line (a no-op for lines or when nothing was drawn).
  void finish();

private:
  void draw_bar(std::uint64_t done, double rate, double percent, const std::string& eta);

  style style_;
  std::uint64_t total_;
  std::FILE* out_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_line_{};
};

/// "1.5 MiB", "300 B".
std::string human_bytes(double bytes);
/// "0:42", "1:02:03", "?" when unknown.
std::string human_duration(double seconds);

} // namespace rdma_cp
