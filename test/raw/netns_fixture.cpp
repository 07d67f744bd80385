#include "netns_fixture.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <stdexcept>

namespace raw_test {

int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void must_run(const std::string& command) {
  if (int rc = run(command); rc != 0)
    throw std::runtime_error("command failed (exit " + std::to_string(rc) + "): " + command);
}

std::string capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    throw std::runtime_error("popen failed: " + command);
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

namespace {

constexpr const char* prefix = "asiorawt";

// Namespaces named prefix<pid>x whose pid is gone belong to a killed earlier run.
void remove_leftovers() {
  DIR* dir = ::opendir("/run/netns");
  if (!dir)
    return;
  std::vector<std::string> stale;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() < std::strlen(prefix) + 2)
      continue;
    const std::string pid = name.substr(std::strlen(prefix), name.size() - std::strlen(prefix) - 1);
    if (pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (::kill(std::stoi(pid), 0) != 0 && errno == ESRCH)
      stale.push_back(name);
  }
  ::closedir(dir);
  for (const auto& name : stale)
    run("ip netns del " + name + " 2>/dev/null");
}

std::string read_mac(const std::string& ns, const std::string& interface) {
  std::string mac =
      capture("ip netns exec " + ns + " cat /sys/class/net/" + interface + "/address");
  while (!mac.empty() && (mac.back() == '\n' || mac.back() == ' '))
    mac.pop_back();
  if (mac.size() != 17)
    throw std::runtime_error("cannot read the MAC address of " + interface);
  return mac;
}

} // namespace

netns_pair::netns_pair() {
  remove_leftovers();
  // One pair per test case at a time in this process: pid alone is unique enough; a counter
  // keeps successive cases from racing the kernel's asynchronous namespace teardown.
  static int counter = 0;
  const std::string id = std::to_string(::getpid());
  const char suffix = static_cast<char>('a' + (counter++ % 13) * 2);
  ns_a = prefix + id + std::string(1, suffix);
  ns_b = prefix + id + std::string(1, static_cast<char>(suffix + 1));
  if_a = "vra" + id.substr(0, 10);
  if_b = "vrb" + id.substr(0, 10);
  try {
    must_run("ip netns add " + ns_a);
    must_run("ip netns add " + ns_b);
    must_run("ip link add " + if_a + " netns " + ns_a + " type veth peer name " + if_b + " netns " +
             ns_b);
    for (const auto& [ns, interface] : {std::pair{ns_a, if_a}, std::pair{ns_b, if_b}}) {
      // No IPv6: its autoconfiguration chatter would only add noise to exact counts.
      must_run("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
      must_run("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.default.disable_ipv6=1");
      must_run("ip -n " + ns + " link set lo up");
      must_run("ip -n " + ns + " link set " + interface + " up");
    }
    mac_a = read_mac(ns_a, if_a);
    mac_b = read_mac(ns_b, if_b);
  } catch (...) {
    run("ip netns del " + ns_a + " 2>/dev/null");
    run("ip netns del " + ns_b + " 2>/dev/null");
    throw;
  }
}

netns_pair::~netns_pair() {
  run("ip netns del " + ns_a + " 2>/dev/null"); // takes the veth pair with it
  run("ip netns del " + ns_b + " 2>/dev/null");
}

scoped_netns::scoped_netns(const std::string& name) {
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original_ < 0)
    throw std::runtime_error("cannot open the current network namespace");
  const int target = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0 || ::setns(target, CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (target >= 0)
      ::close(target);
    ::close(original_);
    throw std::runtime_error("cannot enter network namespace " + name + ": " + why);
  }
  ::close(target);
}

scoped_netns::~scoped_netns() {
  ::setns(original_, CLONE_NEWNET);
  ::close(original_);
}

} // namespace raw_test
