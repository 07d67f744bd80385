#include "fabric_options.hpp"

#include "cli.hpp"

#include <CLI/CLI.hpp>

namespace rdma_fabric {

void describe(CLI::App& app, fabric_settings& s) {
  app.description("Fabric check: every rank against every other over asio_rdma, in rounds of "
                  "disjoint pairs; run it under mpirun or srun (docs/rdma_bench.md).");
  app.add_option("--address", s.address,
                 "this rank's address to listen on (default: the IPv4 address of the device's "
                 "first RoCE GID, or on iWARP the first IPv4 address of this host that "
                 "reaches the device)");
  app.add_option("--device", s.device, "RDMA device (default: the first with an active port)");
  asio_rdma::cli::add_number(app, "--port", s.port, 0, 65535, "listening port (0: any free one)");
  asio_rdma::cli::add_number(app, "--size", s.size, 1, 1u << 30,
                             "message size of the bandwidth test (default 64k)", true);
  asio_rdma::cli::add_number(app, "--depth", s.depth, 1, 4096,
                             "sends in flight in the bandwidth test (default 32)");
  app.add_option("--duration", s.duration, "seconds per test (default 1)")
      ->check(CLI::Range(0.01, 3600.0));
  app.add_option("--warmup", s.warmup, "seconds of warm-up before each test (default 0.2)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_flag("--bidirectional", s.bidirectional,
               "measure both directions of a pair at once (default: each direction alone)");
  app.add_flag("--quick", s.quick, "short tests: 0.25 s each after 0.05 s of warm-up");
  app.add_flag("!--no-retest", s.retest, "do not measure flagged pairs again");
  app.add_option("--bandwidth-fraction", s.limits.bandwidth_fraction,
                 "flag a pair whose bandwidth is below this fraction of the best pair's "
                 "(default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--latency-multiple", s.limits.latency_multiple,
                 "flag a pair whose median latency is above this multiple of the lowest "
                 "(default 3)")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--min-gbps", s.limits.min_gbps,
                 "also flag pairs below this bandwidth (default 0: off)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--max-latency-us", s.limits.max_latency_us,
                 "also flag pairs above this median latency (default 0: off)")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--timeout", s.timeout,
                 "seconds a test may run past its length, and a rank wait for the others past "
                 "that, before the run fails (default 60)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--json", s.json_path, "write every measurement and the parameters here");
  app.add_option("--heatmap", s.heatmap_path,
                 "draw the pair matrix into this PNG (runs fabric_heatmap, python3-matplotlib)");
  app.callback([&s, &app] {
    if (s.quick) {
      if (app.count("--duration") == 0)
        s.duration = 0.25;
      if (app.count("--warmup") == 0)
        s.warmup = 0.05;
    }
  });
}

} // namespace rdma_fabric
