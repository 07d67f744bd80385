// Fuzzes raw_ping's command line (mode, flags, addresses, counts, times):
// the input, split at NUL bytes, is argv. Invariants: bad input is refused
// with std::invalid_argument or boost::system::system_error (which main()
// prints), never anything else; accepted options hold what was required.
#include "fuzz_check.hpp"

#include "options.hpp"

#include <boost/system/system_error.hpp>

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

  try {
    const auto o = raw_ping::parse_options(static_cast<int>(words.size()), argv.data());
    FUZZ_CHECK(!o.interface.empty());
    FUZZ_CHECK(o.interval.count() >= 1 && o.interval.count() <= 3600 * 1000);
    FUZZ_CHECK(o.timeout.count() >= 1 && o.timeout.count() <= 3600 * 1000);
    FUZZ_CHECK(o.backend == "automatic" || o.backend == "verbs" || o.backend == "packet");
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(*e.what() != '\0');
  } catch (const boost::system::system_error& e) {
    FUZZ_CHECK(e.code() == asio_rdma::errc::invalid_option);
  }
  return 0;
}
