#include "namespaces.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace raw_rate {
namespace {

void must_run(const std::string& command) {
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("command failed: " + command);
}

} // namespace

veth_namespaces::veth_namespaces() {
  const std::string id = std::to_string(::getpid());
  ns_a = "asiorawb" + id + "a";
  ns_b = "asiorawb" + id + "b";
  if_a = "vba" + id;
  if_b = "vbb" + id;
  try {
    must_run("ip netns add " + ns_a);
    must_run("ip netns add " + ns_b);
    must_run("ip link add " + if_a + " netns " + ns_a + " type veth peer name " + if_b + " netns " +
             ns_b);
    for (const auto& [ns, interface] : {std::pair{ns_a, if_a}, std::pair{ns_b, if_b}}) {
      must_run("ip netns exec " + ns + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1");
      must_run("ip -n " + ns + " link set " + interface + " up");
    }
    // (sysfs shows the namespace it was mounted in: ask from inside with ip netns exec.)
    FILE* pipe = ::popen(
        ("ip netns exec " + ns_a + " cat /sys/class/net/" + if_a + "/address").c_str(), "r");
    char line[64] = {};
    if (!pipe || !std::fgets(line, sizeof line, pipe))
      throw std::runtime_error("cannot read the MAC address of " + if_a);
    ::pclose(pipe);
    mac_a.assign(line, 17);
  } catch (...) {
    std::system(("ip netns del " + ns_a + " 2>/dev/null").c_str());
    std::system(("ip netns del " + ns_b + " 2>/dev/null").c_str());
    throw;
  }
}

veth_namespaces::~veth_namespaces() {
  std::system(("ip netns del " + ns_a + " 2>/dev/null").c_str());
  std::system(("ip netns del " + ns_b + " 2>/dev/null").c_str());
}

enter_namespace::enter_namespace(const std::string& name) {
  original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  const int target = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (original_ < 0 || target < 0 || ::setns(target, CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (target >= 0)
      ::close(target);
    if (original_ >= 0)
      ::close(original_);
    throw std::runtime_error("cannot enter network namespace " + name + ": " + why);
  }
  ::close(target);
}

enter_namespace::~enter_namespace() {
  ::setns(original_, CLONE_NEWNET);
  ::close(original_);
}

} // namespace raw_rate
