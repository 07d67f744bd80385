// The programs' command lines: CLI11 (Debian libcli11-dev) for options,
// subcommands and --help, plus number parsing with k/m/g suffixes and clear
// errors (a bad value never becomes 0 silently). Every program reports
// misuse the same way: "PROGRAM: reason", a pointer to --help, exit status 2.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace asio_rdma::cli {

/// Thrown for bad command lines (also from inside option callbacks).
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

/// Adds `--name NUMBER` to `app`, parsed with parse_number into `target`.
template <typename T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& target, std::uint64_t min,
                        std::uint64_t max, const std::string& help, bool allow_suffix = false) {
  auto* option = app.add_option_function<std::string>(
      name,
      [&target, name, min, max, allow_suffix](const std::string& text) {
        target = static_cast<T>(parse_number(name, text, min, max, allow_suffix));
      },
      help);
  option->type_name(allow_suffix ? "BYTES" : "N");
  return option;
}

/// Adds `--name WORD` to `app`, WORD one of two: `target` becomes false for `off`, true
/// for `on` ("--lat-send await|post"); anything else is a usage error naming both.
inline CLI::Option* add_either(CLI::App& app, const std::string& name, bool& target,
                               const std::string& off, const std::string& on,
                               const std::string& help) {
  auto* option = app.add_option_function<std::string>(
      name,
      [&target, name, off, on](const std::string& text) {
        if (text != off && text != on)
          throw usage_error(name + ": '" + text + "' is not " + off + " or " + on);
        target = text == on;
      },
      help);
  option->type_name(off + "|" + on);
  return option;
}

/// Runs app.parse. Returns nothing when the program should go on, else its
/// exit status: 0 after printing the help of --help (of the subcommand it
/// follows), 2 after printing what was wrong with the command line.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    // The help of the subcommand that was given, if any.
    const CLI::App* shown = &app;
    for (auto* sub : app.get_subcommands())
      shown = sub;
    std::cout << (shown == &app ? app.help() : shown->help(app.get_name()));
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\n"
              << "Run '" << app.get_name() << " --help' for usage.\n";
    return 2;
  } catch (const usage_error& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\n"
              << "Run '" << app.get_name() << " --help' for usage.\n";
    return 2;
  }
}

} // namespace asio_rdma::cli
