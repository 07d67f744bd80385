// RPC: a key-value service in a few lines of asio_rdma::rpc, its requests and replies
// Protocol Buffers messages (rpc_kv.proto), over RDMA or TCP: the endpoint decides.
//
//   rpc_kv server URL              serves kv.put and kv.get ("rdma://ADDR:PORT", "tcp://...")
//   rpc_kv client URL [BULK_MIB]   puts 100 small values and one of BULK_MIB MiB (default 8),
//                                  gets them all back (16 calls in flight), checks each, and
//                                  asks for a key that is not there
#include "rpc_kv.pb.h"

#include <asio_rdma/rpc.hpp>
#include <asio_rdma/rpc/protobuf_codec.hpp>

#include <boost/asio.hpp>

#include <iostream>
#include <map>
#include <string>

namespace asio = boost::asio;
namespace rpc = asio_rdma::rpc;
namespace kv = asio_rdma_kv;
using asio::awaitable;
using asio::use_awaitable;

// ---------------------------------------------------------------- the service

void add_kv_methods(rpc::server& server, std::map<std::string, std::string>& store) {
  rpc::add_typed_method<kv::put_request, kv::put_reply>(
      server, "kv.put", [&store](kv::put_request r, rpc::call_context&) -> awaitable<kv::put_reply> {
        kv::put_reply reply;
        reply.set_replaced(store.contains(r.key()));
        store[r.key()] = std::move(*r.mutable_value());
        co_return reply;
      });
  rpc::add_typed_method<kv::get_request, kv::get_reply>(
      server, "kv.get", [&store](kv::get_request r, rpc::call_context&) -> awaitable<kv::get_reply> {
        kv::get_reply reply;
        if (auto it = store.find(r.key()); it != store.end()) {
          reply.set_found(true);
          reply.set_value(it->second);
        }
        co_return reply;
      });
}

// ---------------------------------------------------------------- the client

std::string value_of(int i, std::size_t size) {
  std::string v(size, '\0');
  for (std::size_t j = 0; j < size; ++j)
    v[j] = static_cast<char>('a' + (i * 7 + j) % 26);
  return v;
}

awaitable<int> run_client(std::string url, std::size_t bulk_mib) {
  const auto ex = co_await asio::this_coro::executor;
  rpc::client client(ex, url);
  const int small = 100;
  auto size_of = [&](int i) { return i == small ? bulk_mib << 20 : std::size_t(16 + i); };
  for (int i = 0; i <= small; ++i) {
    kv::put_request put;
    put.set_key("key" + std::to_string(i));
    put.set_value(value_of(i, size_of(i)));
    co_await rpc::async_call_as<kv::put_reply>(client, "kv.put", put, use_awaitable);
  }
  // The gets, 16 at a time.
  int checked = 0, wrong = 0, next = 0, running = 16;
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  for (int w = 0; w < 16; ++w)
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      while (next <= small) {
        const int i = next++;
        kv::get_request get;
        get.set_key("key" + std::to_string(i));
        auto reply = co_await rpc::async_call_as<kv::get_reply>(client, "kv.get", get, use_awaitable);
        if (reply.found() && reply.value() == value_of(i, size_of(i)))
          ++checked;
        else
          ++wrong;
      }
    }, [&](std::exception_ptr e) {
      if (e)
        ++wrong;
      if (--running == 0)
        done.cancel();
    });
  co_await done.async_wait(asio::as_tuple(use_awaitable));
  kv::get_request missing;
  missing.set_key("no such key");
  auto none = co_await rpc::async_call_as<kv::get_reply>(client, "kv.get", missing, use_awaitable);
  if (none.found())
    ++wrong;
  std::cout << checked << " values read back, " << wrong << " wrong, the "
            << bulk_mib << " MiB one included; a missing key " << (none.found() ? "found!" : "not found")
            << std::endl;
  co_return wrong == 0 && checked == small + 1 ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[1] : "";
  if ((mode != "server" && mode != "client") || (mode == "server" && argc != 3)) {
    std::cerr << "usage: rpc_kv server URL | rpc_kv client URL [BULK_MIB]\n";
    return 2;
  }
  asio::io_context io;
  try {
    if (mode == "server") {
      std::map<std::string, std::string> store;
      rpc::server server(io.get_executor());
      add_kv_methods(server, store);
      server.listen(argv[2]);
      std::cout << "serving kv.put and kv.get on " << argv[2] << std::endl;
      asio::signal_set stop(io, SIGINT, SIGTERM);
      stop.async_wait([&](auto, int) {
        server.async_shutdown(std::chrono::seconds(5), [&](auto) { io.stop(); });
      });
      io.run();
      return 0;
    }
    int status = 1;
    asio::co_spawn(io, run_client(argv[2], argc > 3 ? std::stoul(argv[3]) : 8),
                   [&](std::exception_ptr e, int s) {
                     status = s;
                     if (e) {
                       try {
                         std::rethrow_exception(e);
                       } catch (const std::exception& x) {
                         std::cerr << "rpc_kv: " << x.what() << std::endl;
                       }
                     }
                   });
    io.run();
    return status;
  } catch (const std::exception& e) {
    std::cerr << "rpc_kv: " << e.what() << std::endl;
    return 1;
  }
}
