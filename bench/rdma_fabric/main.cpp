// rdma_fabric: a fabric check. N ranks started by mpirun or srun measure
// every pair over asio_rdma (rdma_bench's framework client and server), in
// rounds of disjoint pairs; rank 0 judges, retests the suspects, prints the
// table, writes JSON and the heatmap. MPI carries only the bootstrap
// (addresses, results) and the barriers between steps.
//
//   mpirun -np 4 rdma_fabric --json fabric.json --heatmap fabric.png
//   srun -n 4 --mpi=pmix rdma_fabric --quick
//
// Exit status: 0 all pairs within thresholds, 1 some flagged, 2 bad command
// line, 3 the run failed (a rank died, hung, or could not start).
// See docs/rdma_bench.md.
#include "address.hpp"
#include "bootstrap.hpp"
#include "fabric_options.hpp"
#include "framework.hpp"
#include "report.hpp"
#include "schedule.hpp"

#include "cli.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace asio = boost::asio;
using namespace rdma_fabric;

namespace {

/// A rank's identity as it travels through MPI.
struct rank_wire {
  char host[64] = {};
  char address[64] = {};
  char device[64] = {};
  std::uint16_t port = 0;
};

/// One test to run: `from` measures against `to`.
struct test_item {
  kind what = kind::none;
  std::int32_t from = -1;
  std::int32_t to = -1;
};

void copy(char (&target)[64], const std::string& text) {
  std::strncpy(target, text.c_str(), sizeof target - 1);
}

std::string describe(const rank_wire& r) {
  return std::string(r.host) + " " + r.address + ":" + std::to_string(r.port);
}

class fabric {
public:
  fabric(bootstrap& mpi, const fabric_settings& s) : mpi_(mpi), s_(s) {}

  int run() {
    // A rank waiting for the others may wait for one still measuring, which
    // itself gives up only past the test's length plus the timeout: waiting
    // that long and a second more, the measuring rank (whose message says
    // which pair stopped answering) speaks first, and a slow but live test
    // (a connection set up again after a cut, under TCG) is not taken for a
    // dead rank.
    mpi_.set_timeout(s_.warmup + s_.duration + s_.timeout + 1);
    local_address local;
    try {
      local = choose_address(s_.address, s_.device);
      acceptor_.emplace(io_.get_executor(), local.address, s_.port);
    } catch (const std::exception& e) {
      mpi_.abort(std::string("cannot listen: ") + e.what());
    }
    asio::co_spawn(io_, rdma_bench::framework::serve(*acceptor_), [](std::exception_ptr) {});
    rank_wire me;
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof host - 1);
    copy(me.host, host);
    copy(me.address, local.address);
    copy(me.device, local.device);
    me.port = acceptor_->local_endpoint().port();
    peers_ = mpi_.allgather(me, io_, "the ranks' addresses");

    const int n = mpi_.size();
    const auto rounds = tournament(n);
    std::vector<record> mine;
    for (std::size_t r = 0; r < rounds.size(); ++r) {
      for (int step = 0; step < 3; ++step) {
        if (step == 1 && s_.bidirectional)
          continue;
        mpi_.barrier(io_, "round " + std::to_string(r + 1) + " step " + std::to_string(step + 1));
        if (mpi_.rank() == 0)
          progress("round " + std::to_string(r + 1) + " of " + std::to_string(rounds.size()) +
                       (step == 2 ? ": latency" : ": bandwidth"),
                   rounds[r], step == 1);
        for (auto [a, b] : rounds[r]) {
          test_item t{step == 2 ? kind::latency : kind::bandwidth, step == 1 ? b : a,
                      step == 1 ? a : b};
          if (t.from == mpi_.rank())
            mine.push_back(measure(t, int(r)));
        }
      }
    }
    // Every rank contributes the same number of records (unused: kind none).
    mine.resize(3 * std::size_t(n));
    auto all = mpi_.gather(mine, io_, "the results of the rounds");

    std::vector<test_item> retests;
    if (mpi_.rank() == 0) {
      std::erase_if(all, [](const record& x) { return x.what == kind::none; });
      for (const auto& f : judge(all, s_.limits))
        retests.push_back({f.first.what, f.first.from, f.first.to});
    }
    if (s_.retest) {
      std::vector<std::int32_t> count{std::int32_t(retests.size())};
      mpi_.broadcast(count, io_, "the number of retests");
      retests.resize(count[0]);
      mpi_.broadcast(retests, io_, "the list of retests");
      std::vector<record> again(retests.size());
      // One pair at a time: alone in the whole fabric.
      for (std::size_t i = 0; i < retests.size(); ++i) {
        mpi_.barrier(io_, "retest " + std::to_string(i + 1));
        if (mpi_.rank() == 0)
          progress("retest " + std::to_string(i + 1) + " of " + std::to_string(retests.size()) +
                       (retests[i].what == kind::latency ? ": latency" : ": bandwidth"),
                   {{retests[i].from, retests[i].to}}, false);
        if (retests[i].from == mpi_.rank())
          again[i] = measure(retests[i], -1);
      }
      auto gathered = mpi_.gather(again, io_, "the results of the retests");
      for (const auto& x : gathered)
        if (x.what != kind::none)
          all.push_back(x);
    }

    // The verdict goes out before rank 0 writes its files: drawing the
    // heatmap may take longer than the others should wait.
    std::vector<std::int32_t> status{0};
    fabric_report r{s_, {}, all, {}};
    if (mpi_.rank() == 0) {
      r.flags = judge(all, s_.limits);
      status[0] = r.flags.empty() ? 0 : 1;
    }
    mpi_.broadcast(status, io_, "the verdict");
    acceptor_->close();
    // Rank 0 alone exits with the verdict: a launcher may end the job as soon
    // as any rank exits non-zero (srun --kill-on-bad-exit), before rank 0 wrote
    // its files; mpirun and srun exit with rank 0's status. The other ranks are
    // about to exit 0 and ignore SIGTERM from here: such a launcher, ending the
    // job when rank 0 exits with a flagged verdict, would otherwise terminate
    // them while they exit, and srun would exit with their 143 instead of 1
    // (two_hosts_fabric saw it once rank 0 no longer drew a heatmap first).
    if (mpi_.rank() != 0) {
      std::signal(SIGTERM, SIG_IGN);
      return 0;
    }
    return report(r) ? status[0] : 3;
  }

private:
  /// Rank 0's progress line on stderr, e.g. "round 2 of 3: bandwidth 0->2 3->1".
  void progress(const std::string& what, const pair_round& pairs, bool reversed) const {
    char elapsed[32];
    std::snprintf(elapsed, sizeof elapsed, "%.1f s: ",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    std::cerr << "rdma_fabric: " << elapsed << what;
    for (auto [a, b] : pairs)
      std::cerr << " " << (reversed ? b : a) << "->" << (reversed ? a : b);
    std::cerr << std::endl;
  }

  record measure(const test_item& t, int round) {
    record x;
    x.what = t.what;
    x.from = t.from;
    x.to = t.to;
    x.round = round;
    const auto& peer = peers_[t.to];
    rdma_bench::settings b;
    b.role = "client";
    b.host = peer.address;
    b.port = peer.port;
    b.op = rdma_bench::operation::send;
    b.mode =
        t.what == kind::latency ? rdma_bench::test_mode::latency : rdma_bench::test_mode::bandwidth;
    b.duration = s_.duration;
    b.warmup = s_.warmup;
    b.depth = t.what == kind::latency ? 1 : s_.depth;
    b.bidirectional = t.what == kind::bandwidth && s_.bidirectional;
    b.completion = rdma_bench::completion_mode::event;
    b.quiet = true;
    b.connect_timeout = std::chrono::milliseconds(std::int64_t(s_.timeout * 1000));
    // An idle connection (a latency test awaiting its answer) notices a dead
    // peer host in about 1.5 s; with work posted the transport's retries do.
    b.keepalive_interval = std::chrono::milliseconds(500);
    const std::size_t size = t.what == kind::latency ? 8 : s_.size;
    const std::string what = std::string(t.what == kind::latency ? "latency" : "bandwidth") + " " +
                             std::to_string(t.from) + " -> " + std::to_string(t.to) + " (" +
                             describe(peer) + ")";

    bool done = false;
    std::exception_ptr failure;
    rdma_bench::result measured;
    std::string device;
    asio::co_spawn(io_, rdma_bench::framework::measure(b, size, device),
                   [&](std::exception_ptr e, rdma_bench::result r) {
                     done = true;
                     failure = e;
                     measured = std::move(r);
                   });
    using clock = std::chrono::steady_clock;
    const auto deadline =
        clock::now() + std::chrono::duration_cast<clock::duration>(
                           std::chrono::duration<double>(s_.warmup + s_.duration + s_.timeout));
    while (!done) {
      if (clock::now() > deadline)
        mpi_.abort("measuring " + what + ": no result within " +
                   std::to_string(int(s_.warmup + s_.duration + s_.timeout)) +
                   " s; the peer stopped answering");
      if (io_.stopped())
        io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
    }
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        x.set_error(e.what());
      }
      std::cerr << "rdma_fabric: rank " << mpi_.rank() << ": measuring " << what
                << " failed: " << x.error << std::endl;
      mpi_.set_context("rank " + std::to_string(mpi_.rank()) + " saw " + what +
                       " fail: " + x.error);
      return x;
    }
    x.iterations = measured.iterations;
    x.seconds = measured.seconds;
    x.gbps = measured.gbps();
    if (!measured.latencies_us.empty()) {
      x.latency_min_us = measured.quantile(0);
      x.latency_median_us = measured.quantile(0.5);
      x.latency_p99_us = measured.quantile(0.99);
    }
    if (x.iterations == 0)
      x.set_error("nothing completed while measuring");
    return x;
  }

  /// Rank 0: the table, JSON and heatmap; false when a file could not be
  /// written.
  bool report(fabric_report& r) {
    for (const auto& p : peers_)
      r.ranks.push_back({p.host, p.address, p.port, p.device});
    print_table(std::cout, r);
    std::cout.flush();
    try {
      if (!s_.json_path.empty()) {
        write_json(s_.json_path, r);
        std::cout << "rdma_fabric: wrote " << s_.json_path << std::endl;
      }
      return s_.heatmap_path.empty() || draw_heatmap();
    } catch (const std::exception& e) {
      std::cerr << "rdma_fabric: " << e.what() << std::endl;
      return false;
    }
  }

  /// Runs fabric_heatmap (next to this program) on the JSON file.
  bool draw_heatmap() {
    auto script = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "fabric_heatmap";
    std::string script_text = script.string();
    std::vector<char*> argv{script_text.data(), s_.json_path.data(), s_.heatmap_path.data(),
                            nullptr};
    // Its #! line names Debian's python3, which python3-matplotlib serves.
    pid_t pid = 0;
    if (int e = ::posix_spawn(&pid, script_text.c_str(), nullptr, nullptr, argv.data(), environ);
        e != 0) {
      std::cerr << "rdma_fabric: cannot run " << script_text << ": " << std::strerror(e)
                << std::endl;
      return false;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "rdma_fabric: " << script_text << " failed" << std::endl;
      return false;
    }
    std::cout << "rdma_fabric: wrote " << s_.heatmap_path << std::endl;
    return true;
  }

  bootstrap& mpi_;
  fabric_settings s_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  asio::io_context io_{1};
  std::optional<asio_rdma::acceptor> acceptor_;
  std::vector<rank_wire> peers_;
};

} // namespace

int main(int argc, char** argv) {
  fabric_settings s;
  CLI::App app("", "rdma_fabric");
  describe(app, s);
  // Every rank parses the same command line; rank 0 alone speaks of it.
  std::unique_ptr<bootstrap> mpi;
  try {
    mpi = std::make_unique<bootstrap>(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rdma_fabric: " << e.what() << std::endl;
    return 3;
  }
  std::optional<int> usage;
  {
    std::ostringstream ignored_out, ignored_err;
    std::streambuf *out = nullptr, *err = nullptr;
    if (mpi->rank() != 0) {
      out = std::cout.rdbuf(ignored_out.rdbuf());
      err = std::cerr.rdbuf(ignored_err.rdbuf());
    }
    usage = asio_rdma::cli::parse(app, argc, argv);
    if (!usage && !s.heatmap_path.empty() && s.json_path.empty()) {
      std::cerr << "rdma_fabric: --heatmap needs --json (the picture is drawn from it)\n";
      usage = 2;
    }
    if (!usage && mpi->size() < 2) {
      std::cerr << "rdma_fabric: needs at least 2 ranks (run it under mpirun -np N or srun -n N), "
                   "got "
                << mpi->size() << "\n";
      usage = 2;
    }
    if (out) {
      std::cout.rdbuf(out);
      std::cerr.rdbuf(err);
    }
  }
  if (usage)
    return *usage;
  return fabric(*mpi, s).run();
}
