// apps/raw_ping between two namespaces created by the test (needs root): the responder is
// answered by the system's ping (iputils); the requester pings a kernel and the responder.
#define BOOST_TEST_MODULE raw_ping_netns
#include <boost/test/unit_test.hpp>

#include "netns_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <poll.h>
#include <stdexcept>
#include <thread>

using namespace raw_test;

namespace {

const std::string raw_ping = RAW_PING_PATH;

// A responder running in a namespace; killed (and reaped) on destruction, and by the kernel
// if this test process dies first.
class responder_process {
public:
  responder_process(const std::string& ns, const std::string& interface, const std::string& ip) {
    int out[2];
    if (::pipe(out) != 0)
      throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ < 0)
      throw std::runtime_error("fork");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::execlp("ip", "ip", "netns", "exec", ns.c_str(), raw_ping.c_str(), "responder",
               "--interface", interface.c_str(), "--ip", ip.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    // Ready once it printed its banner (its flow rules are installed by then).
    pollfd p{out[0], POLLIN, 0};
    char banner[256] = {};
    if (::poll(&p, 1, 5000) != 1 || ::read(out[0], banner, sizeof banner - 1) <= 0) {
      ::close(out[0]);
      stop();
      throw std::runtime_error("raw_ping responder did not start");
    }
    ::close(out[0]);
    BOOST_TEST_MESSAGE("responder: " << banner);
  }
  ~responder_process() { stop(); }

  /// True while the process runs.
  bool running() {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

private:
  void stop() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 50 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  pid_t pid_ = -1;
};

} // namespace

BOOST_AUTO_TEST_CASE(responder_is_answered_by_system_ping) {
  netns_pair net;
  must_run("ip -n " + net.ns_b + " addr add 192.0.2.1/24 dev " + net.if_b);
  responder_process responder(net.ns_a, net.if_a, "192.0.2.2");
  const auto out = capture("ip netns exec " + net.ns_b +
                           " timeout 20 ping -n -c 3 -i 0.2 -W 2 192.0.2.2 2>&1; echo exit=$?");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(out.find("3 packets transmitted, 3 received") != std::string::npos, out);
  BOOST_TEST(out.find("exit=0") != std::string::npos);
  // The kernel of the pinging namespace learnt the responder's MAC through the raw ARP reply.
  const auto neighbours = capture("ip -n " + net.ns_b + " neigh show 192.0.2.2");
  BOOST_TEST(neighbours.find(net.mac_a) != std::string::npos, neighbours);
  BOOST_TEST(responder.running());
}

BOOST_AUTO_TEST_CASE(requester_pings_a_kernel) {
  netns_pair net;
  must_run("ip -n " + net.ns_b + " addr add 192.0.2.1/24 dev " + net.if_b);
  const auto out = capture("ip netns exec " + net.ns_a + " timeout 20 " + raw_ping +
                           " request --interface " + net.if_a +
                           " --ip 192.0.2.2 --to 192.0.2.1 --count 3 --interval 0.2 2>&1;"
                           " echo exit=$?");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(out.find("PING 192.0.2.1 from 192.0.2.2") != std::string::npos, out);
  BOOST_TEST(out.find(net.mac_b) != std::string::npos); // resolved by ARP
  BOOST_TEST(out.find("icmp_seq=3 ttl=64 time=") != std::string::npos, out);
  BOOST_TEST(out.find("3 packets transmitted, 3 received, 0% packet loss") != std::string::npos);
  BOOST_TEST(out.find("exit=0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(requester_pings_the_responder) {
  netns_pair net; // neither side has an address: raw sockets only
  responder_process responder(net.ns_b, net.if_b, "192.0.2.7");
  const auto out = capture("ip netns exec " + net.ns_a + " timeout 20 " + raw_ping +
                           " request --interface " + net.if_a +
                           " --ip 192.0.2.8 --to 192.0.2.7 --count 2 --interval 0.1 2>&1;"
                           " echo exit=$?");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(out.find("2 packets transmitted, 2 received") != std::string::npos, out);
  BOOST_TEST(out.find("exit=0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unanswered_and_bad_arguments_fail_clearly) {
  netns_pair net;
  auto out = capture("ip netns exec " + net.ns_a + " timeout 20 " + raw_ping +
                     " request --interface " + net.if_a +
                     " --ip 192.0.2.2 --to 192.0.2.99 --count 1 --timeout 0.2 2>&1; echo exit=$?");
  BOOST_TEST(out.find("no ARP reply from 192.0.2.99") != std::string::npos, out);
  BOOST_TEST(out.find("exit=2") != std::string::npos);
  out =
      capture(raw_ping + " request --interface x --ip 192.0.2.300 --to 1.2.3.4 2>&1; echo exit=$?");
  BOOST_TEST(out.find("192.0.2.300") != std::string::npos, out);
  BOOST_TEST(out.find("exit=2") != std::string::npos);
  out = capture(raw_ping + " responder --interface no-such-if0 --ip 192.0.2.1 2>&1; echo exit=$?");
  BOOST_TEST(out.find("No such device") != std::string::npos, out);
  BOOST_TEST(out.find("exit=2") != std::string::npos);
}
