// grpc_echo: gRPC C++ unary echo calls over TCP, with rpc_echo's command line and output,
// for bench/compare_rpc (the reference a gRPC user moving to asio_rdma::rpc knows).
//
//   grpc_echo server HOST:PORT                 serves echo.call until killed (callback API)
//   grpc_echo client HOST:PORT lat SIZE SECONDS     one call at a time; half the round trip
//   grpc_echo client HOST:PORT bw SIZE DEPTH SECONDS  DEPTH calls in flight (callback API)
//
// Prints "grpc_echo lat size=8 calls=N p50_us=X p99_us=Y" or
// "grpc_echo bw size=64 depth=32 calls=N calls_per_s=X"; the first quarter second is a
// warm-up that is not counted.
#include "echo.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto warm_up = std::chrono::milliseconds(250);

class echo_service final : public grpc_echo::echo::CallbackService {
  grpc::ServerUnaryReactor* call(grpc::CallbackServerContext* context,
                                 const grpc_echo::blob* request,
                                 grpc_echo::blob* reply) override {
    reply->set_data(request->data());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int serve(const std::string& address) {
  echo_service service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "grpc_echo: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("grpc_echo: listening on %s\n", address.c_str());
  std::fflush(stdout);
  server->Wait();
  return 0;
}

int latency(grpc_echo::echo::Stub& client, std::size_t size, std::chrono::seconds duration) {
  grpc_echo::blob request, reply;
  request.set_data(std::string(size, 'Z'));
  std::vector<double> one_way_us;
  one_way_us.reserve(1 << 20);
  const auto start = clock_type::now(), end = start + duration;
  for (auto now = start; now < end;) {
    const auto t0 = now;
    grpc::ClientContext context;
    const grpc::Status status = client.call(&context, request, &reply);
    now = clock_type::now();
    if (!status.ok() || reply.data().size() != size) {
      std::fprintf(stderr, "grpc_echo: call failed: %s\n", status.error_message().c_str());
      return 1;
    }
    if (t0 - start >= warm_up)
      one_way_us.push_back(std::chrono::duration<double, std::micro>(now - t0).count() / 2);
  }
  if (one_way_us.empty())
    return 1;
  auto at = [&](double q) {
    auto it = one_way_us.begin() + static_cast<std::ptrdiff_t>(q * (one_way_us.size() - 1));
    std::nth_element(one_way_us.begin(), it, one_way_us.end());
    return *it;
  };
  const double p50 = at(0.5), p99 = at(0.99);
  std::printf("grpc_echo lat size=%zu calls=%zu p50_us=%.2f p99_us=%.2f\n", size,
              one_way_us.size(), p50, p99);
  return 0;
}

/// One of DEPTH callers: calls again as each call returns, until the end.
struct caller {
  grpc_echo::echo::Stub* client; // gRPC's generated client class is named Stub
  grpc_echo::blob request, reply;
  std::unique_ptr<grpc::ClientContext> context;
};

int rate(grpc_echo::echo::Stub& client, std::size_t size, int depth, std::chrono::seconds duration) {
  const auto start = clock_type::now(), counted_from = start + warm_up, end = start + duration;
  std::atomic<std::size_t> counted{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::condition_variable done;
  int running = depth;
  std::vector<caller> callers(depth);
  std::function<void(caller&)> next = [&](caller& c) {
    c.context = std::make_unique<grpc::ClientContext>();
    c.client->async()->call(c.context.get(), &c.request, &c.reply, [&](grpc::Status status) {
      const auto now = clock_type::now();
      if (!status.ok() || c.reply.data().size() != size)
        failed = true;
      if (now >= counted_from && now < end)
        ++counted;
      if (now < end && !failed)
        return next(c);
      std::lock_guard lock(m);
      if (--running == 0)
        done.notify_one();
    });
  };
  for (auto& c : callers) {
    c.client = &client;
    c.request.set_data(std::string(size, 'Z'));
    next(c);
  }
  std::unique_lock lock(m);
  done.wait(lock, [&] { return running == 0; });
  if (failed) {
    std::fprintf(stderr, "grpc_echo: a call failed\n");
    return 1;
  }
  const double seconds = std::chrono::duration<double>(end - counted_from).count();
  std::printf("grpc_echo bw size=%zu depth=%d calls=%zu calls_per_s=%.0f\n", size, depth,
              counted.load(), counted.load() / seconds);
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: grpc_echo server HOST:PORT\n"
                       "       grpc_echo client HOST:PORT lat SIZE SECONDS\n"
                       "       grpc_echo client HOST:PORT bw SIZE DEPTH SECONDS\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "server")
    return serve(args[1]);
  const bool lat = args.size() == 5 && args[0] == "client" && args[2] == "lat";
  const bool bw = args.size() == 6 && args[0] == "client" && args[2] == "bw";
  if (!lat && !bw)
    return usage();
  auto channel = grpc::CreateChannel(args[1], grpc::InsecureChannelCredentials());
  auto client = grpc_echo::echo::NewStub(channel); // gRPC's client object
  const std::size_t size = std::stoul(args[3]);
  const std::chrono::seconds duration(std::stoi(args.back()));
  return lat ? latency(*client, size, duration)
             : rate(*client, size, std::stoi(args[4]), duration);
}
