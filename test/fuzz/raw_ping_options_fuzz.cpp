// Fuzzes raw_ping's command line (subcommand, flags, addresses, counts,
// times) as CLI11 parses it: the input, split at NUL bytes, is argv.
// Invariants: bad input is refused with CLI11's ParseError or the programs'
// usage_error (both of which main() prints before exiting 2), never anything
// else; accepted options hold what was required.
#include "fuzz_check.hpp"

#include "cli.hpp"
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"raw_ping"};
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  if (!word.empty())
    words.push_back(word);
  std::vector<char*> argv;
  for (auto& w : words)
    argv.push_back(w.data());
  argv.push_back(nullptr);

  raw_ping::options o;
  CLI::App app("", "raw_ping");
  raw_ping::describe(app, o);
  try {
    app.parse(static_cast<int>(words.size()), argv.data());
    FUZZ_CHECK(!o.interface.empty());
    FUZZ_CHECK(o.interval.count() >= 1 && o.interval.count() <= 3600 * 1000);
    FUZZ_CHECK(o.timeout.count() >= 1 && o.timeout.count() <= 3600 * 1000);
    FUZZ_CHECK(o.backend == "automatic" || o.backend == "verbs" || o.backend == "packet");
  } catch (const CLI::ParseError& e) {
    // Includes --help (CallForHelp), which main() answers with exit 0.
    FUZZ_CHECK(e.get_exit_code() != 0 || e.get_name() == "CallForHelp" ||
               e.get_name() == "CallForAllHelp");
  } catch (const asio_rdma::cli::usage_error& e) {
    FUZZ_CHECK(*e.what() != '\0');
  }
  return 0;
}
