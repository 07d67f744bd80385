// Helpers for tests that run on two hosts at once (test/vm/two_hosts): which
// host this is, the other one's address, and requests to the host that runs
// both guests (kill a guest, cut its link, meet at a barrier).
#pragma once

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace asio_rdma::test {

inline std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    BOOST_FAIL(name << " is not set: run two-host tests through test/vm/two_hosts");
  return v;
}

/// "A" or "B".
inline std::string host_name() {
  return env_or_fail("ASIO_RDMA_HOST");
}
inline bool is_host_a() {
  return host_name() == "A";
}
/// The other host's address.
inline std::string peer_address() {
  return env_or_fail("ASIO_RDMA_PEER_ADDR");
}

/// Sends one request line to the host over the guest's "ctl" serial port and
/// returns the answer ("ok" or "error: ..."). Blocks: the host answers once
/// it has done it (a barrier, once both guests asked).
inline std::string ask_host(const std::string& request) {
  static int fd = [] {
    for (const auto& port : std::filesystem::directory_iterator("/sys/class/virtio-ports")) {
      std::ifstream name(port.path() / "name");
      std::string n;
      if (std::getline(name, n) && n == "ctl")
        return ::open(("/dev/" + port.path().filename().string()).c_str(), O_RDWR | O_CLOEXEC);
    }
    return -1;
  }();
  BOOST_REQUIRE_MESSAGE(fd >= 0, "no virtio port named ctl: not under test/vm/two_hosts");
  std::string line = request + "\n";
  BOOST_REQUIRE(::write(fd, line.data(), line.size()) == ssize_t(line.size()));
  std::string answer;
  char c;
  while (true) {
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR)
      continue;
    BOOST_REQUIRE_MESSAGE(n == 1, "the host closed the control port: " << std::strerror(errno));
    if (c == '\n')
      break;
    answer += c;
  }
  return answer;
}

/// ask_host, requiring "ok".
inline void host_do(const std::string& request) {
  auto answer = ask_host(request);
  BOOST_REQUIRE_MESSAGE(answer == "ok", request << ": " << answer);
}

} // namespace asio_rdma::test
