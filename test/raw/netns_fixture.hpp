// Two network namespaces joined by a veth pair, created for one test and removed afterwards
// (also when the test fails). Names carry the pid; leftovers of killed runs are removed first.
// Creation failures throw: the netns suite runs as root and must fail, not skip. Test-only.
#pragma once

#include <string>
#include <vector>

namespace raw_test {

/// Runs a shell command; returns its exit status.
int run(const std::string& command);
/// Runs a shell command; throws std::runtime_error naming it when it fails.
void must_run(const std::string& command);
/// Runs a shell command and returns its standard output.
std::string capture(const std::string& command);

class netns_pair {
public:
  netns_pair();
  ~netns_pair();
  netns_pair(const netns_pair&) = delete;
  netns_pair& operator=(const netns_pair&) = delete;

  std::string ns_a, ns_b;   // namespace names
  std::string if_a, if_b;   // veth ends, if_a in ns_a, if_b in ns_b
  std::string mac_a, mac_b; // their MAC addresses
};

/// Switches the calling thread into a named network namespace; restores on destruction.
/// Sockets created meanwhile stay in that namespace.
class scoped_netns {
public:
  explicit scoped_netns(const std::string& name);
  ~scoped_netns();
  scoped_netns(const scoped_netns&) = delete;
  scoped_netns& operator=(const scoped_netns&) = delete;

private:
  int original_ = -1;
};

} // namespace raw_test
