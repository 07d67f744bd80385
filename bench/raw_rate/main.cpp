// raw_rate: receive rate of a raw_socket with one flow rule on a veth pair, against tcpdump
// with the same filter writing to /dev/null, in the same run on the same traffic: a sender in
// the other namespace blasts UDP frames; both receivers capture concurrently; each one's
// packets per second and the ratio are printed. Needs root (namespaces, tcpdump).
//
//   raw_rate [--duration SECONDS] [--payload BYTES] [--receive-buffers N]
#include "blaster.hpp"
#include "namespaces.hpp"

#include "cli.hpp"

#include <asio_rdma/raw_socket.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct settings {
  double duration = 5.0;
  std::size_t payload = 18; // a 60-byte frame
  std::size_t receive_buffers = 4096;
  std::uint16_t port = 9000;
};

void describe(CLI::App& app, settings& s) {
  app.description("Receive rate of a raw_socket against tcpdump on a veth pair (needs root)");
  app.add_option("--duration", s.duration, "seconds of traffic (default 5)")
      ->check(CLI::Range(0.5, 600.0));
  asio_rdma::cli::add_number(app, "--payload", s.payload, 18, 1472,
                             "UDP payload bytes (default 18: a 60-byte frame)");
  asio_rdma::cli::add_number(app, "--receive-buffers", s.receive_buffers, 1, 1 << 20,
                             "the raw socket's receive buffers (default 4096)");
}

// tcpdump in the receiving namespace, its stderr (the statistics) read back at the end.
class tcpdump_process {
public:
  tcpdump_process(const std::string& ns, const std::string& interface, const std::string& filter,
                  std::size_t buffer_kib) {
    int err[2];
    if (::pipe(err) != 0)
      throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(err[1], STDERR_FILENO);
      ::close(err[0]);
      ::close(err[1]);
      const std::string buffer = std::to_string(buffer_kib);
      ::execlp("ip", "ip", "netns", "exec", ns.c_str(), "tcpdump", "-i", interface.c_str(), "-n",
               "-p", "-B", buffer.c_str(), "-w", "/dev/null", filter.c_str(),
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(err[1]);
    stderr_ = err[0];
    // Ready when it says it is listening.
    while (output_.find("listening on") == std::string::npos) {
      pollfd p{stderr_, POLLIN, 0};
      char buf[512];
      ssize_t n;
      if (::poll(&p, 1, 10000) != 1 || (n = ::read(stderr_, buf, sizeof buf)) <= 0)
        throw std::runtime_error("tcpdump did not start: " + output_);
      output_.append(buf, static_cast<std::size_t>(n));
    }
  }
  ~tcpdump_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stderr_ >= 0)
      ::close(stderr_);
  }

  /// CPU seconds (user + system) tcpdump used so far.
  double cpu_seconds() const {
    std::FILE* f = std::fopen(("/proc/" + std::to_string(pid_) + "/stat").c_str(), "r");
    if (!f)
      return 0;
    char buf[1024] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    std::string stat(buf, n);
    // Fields after the command name in parentheses: state is field 3, utime 14, stime 15.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14)
        utime = std::stoull(field);
      if (i == 15)
        stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  /// Stops tcpdump (SIGINT, so it prints its counts); returns "N packets captured" and the
  /// kernel's drops.
  std::pair<std::uint64_t, std::uint64_t> stop() {
    ::kill(pid_, SIGINT);
    char buf[512];
    ssize_t n;
    while ((n = ::read(stderr_, buf, sizeof buf)) > 0)
      output_.append(buf, static_cast<std::size_t>(n));
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    std::smatch m;
    std::uint64_t captured = 0, dropped = 0;
    if (std::regex_search(output_, m, std::regex(R"((\d+) packets? captured)")))
      captured = std::stoull(m[1]);
    else
      throw std::runtime_error("no statistics from tcpdump: " + output_);
    if (std::regex_search(output_, m, std::regex(R"((\d+) packets? dropped by kernel)")))
      dropped = std::stoull(m[1]);
    return {captured, dropped};
  }

private:
  pid_t pid_ = -1;
  int stderr_ = -1;
  std::string output_;
};

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app("", "raw_rate");
  describe(app, s);
  if (auto status = asio_rdma::cli::parse(app, argc, argv))
    return *status;
  try {
    raw_rate::veth_namespaces net;
    const std::string filter = "udp dst port " + std::to_string(s.port);

    asio::io_context io;
    asio_rdma::raw_socket_options options;
    options.receive_buffers = s.receive_buffers;
    options.backend = asio_rdma::raw_backend::packet;
    asio_rdma::raw_socket socket;
    {
      raw_rate::enter_namespace in(net.ns_a);
      socket = asio_rdma::raw_socket::open(io.get_executor(), net.if_a, options);
    }
    asio_rdma::flow_rule rule;
    rule.protocol = asio_rdma::ip_protocol::udp;
    rule.destination_port = s.port;
    auto flow = socket.add_flow(rule);
    // The same memory for both: our ring is one page per receive buffer.
    tcpdump_process tcpdump(net.ns_a, net.if_a, filter,
                            s.receive_buffers * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) /
                                1024);

    std::atomic<bool> stop_sender{false};
    raw_rate::blast_result sent;
    std::uint64_t received = 0;
    double our_cpu = 0;
    const auto length = std::chrono::duration<double>(s.duration);
    std::chrono::steady_clock::time_point started, stopped;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          std::exception_ptr sender_failure;
          std::thread sender([&] {
            try {
              sent = raw_rate::blast(net.ns_b, net.if_b, asio_rdma::parse_mac_address(net.mac_a),
                                     s.port, s.payload, stop_sender);
            } catch (...) {
              sender_failure = std::current_exception();
            }
          });
          started = std::chrono::steady_clock::now();
          timespec cpu_start{};
          ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
          bool sending = true;
          for (;;) {
            auto [ec, batch] =
                co_await socket.async_receive(1024, 50ms, asio::as_tuple(asio::use_awaitable));
            received += batch.size();
            if (ec && ec != asio::error::timed_out)
              throw boost::system::system_error(ec, "receive");
            if (sending && std::chrono::steady_clock::now() - started >= length) {
              stop_sender = true;
              sender.join();
              if (sender_failure)
                std::rethrow_exception(sender_failure);
              stopped = std::chrono::steady_clock::now();
              sending = false;
            }
            if (!sending && ec == asio::error::timed_out) {
              timespec cpu_end{};
              ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
              our_cpu = static_cast<double>(cpu_end.tv_sec - cpu_start.tv_sec) +
                        static_cast<double>(cpu_end.tv_nsec - cpu_start.tv_nsec) * 1e-9;
              break; // drained
            }
          }
        },
        [](std::exception_ptr e) {
          if (e)
            std::rethrow_exception(e);
        });
    io.run();
    const double tcpdump_cpu = tcpdump.cpu_seconds();
    const auto [tcpdump_captured, tcpdump_dropped] = tcpdump.stop();
    const double seconds = std::chrono::duration<double>(stopped - started).count();
    const auto stats = socket.statistics();
    const double ours = received / seconds, theirs = tcpdump_captured / seconds;
    std::printf("raw_rate: veth pair, %zu-byte UDP frames, filter \"%s\", %.1f s, "
                "receive buffers %zu (tcpdump -B %zu KiB)\n",
                14 + 20 + 8 + s.payload, filter.c_str(), seconds, s.receive_buffers,
                s.receive_buffers * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024);
    std::printf("  offered by the sender    %12.0f pps (%llu frames, %llu ENOBUFS)\n",
                sent.sent / seconds, static_cast<unsigned long long>(sent.sent),
                static_cast<unsigned long long>(sent.dropped));
    std::printf("  raw_socket (packet)      %12.0f pps (%llu frames, %llu dropped; "
                "%.0f ns CPU/frame in user space + syscalls)\n",
                ours, static_cast<unsigned long long>(received),
                static_cast<unsigned long long>(stats.receive_dropped),
                received ? our_cpu * 1e9 / static_cast<double>(received) : 0.0);
    std::printf("  tcpdump -w /dev/null     %12.0f pps (%llu frames, %llu dropped by kernel; "
                "%.0f ns CPU/frame)\n",
                theirs, static_cast<unsigned long long>(tcpdump_captured),
                static_cast<unsigned long long>(tcpdump_dropped),
                tcpdump_captured ? tcpdump_cpu * 1e9 / static_cast<double>(tcpdump_captured) : 0.0);
    std::printf("  ratio raw_socket / tcpdump: %.2f\n", theirs > 0 ? ours / theirs : 0.0);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "raw_rate: " << e.what() << "\n";
    return 2;
  }
}
