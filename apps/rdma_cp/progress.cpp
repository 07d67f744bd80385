// rdma_cp send's progress display (see progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace rdma_cp {

std::string human_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 360000)
    return "?";
  auto s = static_cast<unsigned long>(std::lround(seconds));
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lu:%02lu", s / 60, s % 60);
  return text;
}

progress_display::progress_display(style s, std::uint64_t total, std::FILE* out)
    : style_(s), total_(total), out_(out) {}

progress_display::style progress_display::for_stream(std::FILE* out) {
  return ::isatty(::fileno(out)) ? style::bar : style::lines;
}

std::chrono::milliseconds progress_display::interval() const noexcept {
  // A bar is cheap to redraw; a log gets a line a second at most.
  return style_ == style::bar ? std::chrono::milliseconds(200) : std::chrono::milliseconds(1000);
}

void progress_display::update(const asio_rdma::transfer_progress& p, std::uint64_t before) {
  if (style_ == style::none)
    return;
  std::uint64_t done = std::min(before + p.bytes_done, total_);
  double percent = total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
  double rate = p.bytes_per_second;
  std::string eta = done >= total_ ? "0:00"
                    : rate > 0     ? human_duration(static_cast<double>(total_ - done) / rate)
                                   : "?";
  if (style_ == style::bar)
    return draw_bar(done, rate, percent, eta);
  // Lines: each operation reports every interval() and once at its end; a
  // program sending several paths would print those ends close together.
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_line_ < interval())
    return;
  last_line_ = now;
  std::fprintf(out_, "rdma_cp: progress %llu/%llu bytes (%.0f%%), %s/s, ETA %s\n",
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               percent, human_bytes(rate).c_str(), eta.c_str());
  std::fflush(out_);
}

void progress_display::draw_bar(std::uint64_t done, double rate, double percent,
                                const std::string& eta) {
  constexpr int width = 30;
  int filled = static_cast<int>(percent * width / 100.0);
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < width)
    bar += '>';
  bar.resize(width, ' ');
  // \r and "erase to the end of the line": the line is redrawn in place.
  std::fprintf(out_, "\r[%s] %3.0f%% %s / %s  %s/s  ETA %s\x1b[K", bar.c_str(), percent,
               human_bytes(static_cast<double>(done)).c_str(),
               human_bytes(static_cast<double>(total_)).c_str(), human_bytes(rate).c_str(),
               eta.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void progress_display::finish() {
  if (style_ == style::bar && drawn_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    drawn_ = false;
  }
}

} // namespace rdma_cp
