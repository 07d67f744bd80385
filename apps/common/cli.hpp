// Small command-line helpers shared by the programs: option lookup and
// number parsing with clear errors (a bad value never becomes 0 silently).
#pragma once

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace asio_rdma::cli {

/// Thrown for bad command lines; the program prints what() and its usage.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses an unsigned integer in [min, max]; accepts k/K, m/M, g/G suffixes
/// (powers of 1024) when `allow_suffix`.
inline std::uint64_t parse_number(std::string_view option, std::string_view text,
                                  std::uint64_t min, std::uint64_t max,
                                  bool allow_suffix = false) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view rest(end, text.data() + text.size() - end);
  if (ec == std::errc() && allow_suffix && rest.size() == 1) {
    int shift = 0;
    switch (rest[0]) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: shift = -1;
    }
    if (shift >= 0 && value <= (max >> shift)) {
      value <<= shift;
      rest = {};
    }
  }
  if (ec != std::errc() || !rest.empty() || text.empty())
    throw usage_error(std::string(option) + ": '" + std::string(text) + "' is not a number");
  if (value < min || value > max)
    throw usage_error(std::string(option) + ": " + std::string(text) + " is out of range [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]");
  return value;
}

/// Walks argv: positional arguments and "--name value" / "--flag" options.
class arguments {
public:
  arguments(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  bool done() const { return pos_ >= args_.size(); }
  std::string_view peek() const { return args_[pos_]; }
  std::string_view next() { return args_[pos_++]; }
  /// The value of the option just taken with next().
  std::string_view value(std::string_view option) {
    if (done())
      throw usage_error(std::string(option) + " needs a value");
    return next();
  }

private:
  std::vector<std::string_view> args_;
  std::size_t pos_ = 0;
};

} // namespace asio_rdma::cli
