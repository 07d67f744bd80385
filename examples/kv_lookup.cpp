// One-sided operations: a key-value lookup by RDMA read.
//
// The server puts a fixed-size hash table into registered memory, advertises
// it to each client (address, rkey, length) and never looks at it again: the
// client finds a key by reading the table's slots with RDMA reads, which the
// server's CPU takes no part in (libiwarp's iw_post_read style).
//
//   kv_lookup server ADDR PORT KEY=VALUE...
//   kv_lookup client ADDR PORT KEY...       prints "KEY = VALUE" or "KEY: not found"
#include <asio_rdma/asio_rdma.hpp>

#include <boost/asio.hpp>

#include <array>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

// The table: 256 slots of 128 bytes (a 32-byte key, a 96-byte value, both
// zero-padded), linear probing from slot hash(key) % 256.
constexpr std::size_t slots = 256, key_size = 32, value_size = 96,
                      slot_size = key_size + value_size;
constexpr std::size_t max_probes = 8;

std::uint64_t hash(std::string_view key) { // FNV-1a: the same in every process
  std::uint64_t h = 14695981039346656037ull;
  for (char c : key)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// One client: its own copy of the table, registered with the connection's
// protection domain, readable (only) by the peer, alive until it disconnects.
awaitable<void> serve_one(asio_rdma::connection conn, const std::vector<std::string>& entries) {
  asio_rdma::memory_region table(conn, slots * slot_size, asio_rdma::access::remote_read);
  for (const auto& entry : entries) {
    auto eq = entry.find('=');
    std::string key = entry.substr(0, eq), value = entry.substr(eq + 1);
    for (std::size_t probe = 0; probe < max_probes; ++probe) {
      auto* slot = table.data().data() + (hash(key) + probe) % slots * slot_size;
      if (slot[0] == std::byte{0}) {
        std::memcpy(slot, key.data(), key.size());
        std::memcpy(slot + key_size, value.data(), value.size());
        break;
      }
    }
  }
  co_await conn.async_send_remote_buffer(table.remote(), use_awaitable);
  // The client only reads; its disconnect ends this receive (eof).
  std::array<std::byte, 16> ignored;
  co_await conn.async_receive(asio::buffer(ignored), asio::as_tuple(use_awaitable));
}

awaitable<void> serve(asio_rdma::acceptor& acceptor, const std::vector<std::string>& entries) {
  for (;;) {
    auto conn = co_await acceptor.async_accept(use_awaitable);
    asio::co_spawn(acceptor.get_executor(), serve_one(std::move(conn), entries), asio::detached);
  }
}

awaitable<int> lookup(asio::any_io_executor ex, std::string addr, int port,
                      std::vector<std::string> keys) {
  // Named objects rather than temporaries inside co_await expressions: with
  // GCC 12 a `{}` options temporary and a slice temporary here crashed
  // (free(): invalid pointer).
  asio_rdma::connection_options options;
  auto conn = co_await asio_rdma::async_connect(ex, addr, static_cast<std::uint16_t>(port), options,
                                                use_awaitable);
  auto table = co_await conn.async_receive_remote_buffer(std::chrono::seconds(10), use_awaitable);
  asio_rdma::memory_region slot(conn, slot_size, asio_rdma::access::local_write);
  for (const auto& key : keys) {
    bool found = false;
    for (std::size_t probe = 0; probe < max_probes && !found; ++probe) {
      auto remote = table.slice((hash(key) + probe) % slots * slot_size, slot_size);
      auto local = slot.slice();
      co_await conn.async_read(local, remote, use_awaitable); // one RDMA read
      const char* bytes = reinterpret_cast<const char*>(slot.data().data());
      if (bytes[0] == '\0')
        break; // an empty slot ends the probe sequence
      if (std::string(bytes, strnlen(bytes, key_size)) == key) {
        std::cout << key << " = "
                  << std::string(bytes + key_size, strnlen(bytes + key_size, value_size))
                  << std::endl;
        found = true;
      }
    }
    if (!found)
      std::cout << key << ": not found" << std::endl;
  }
  co_await conn.async_disconnect(use_awaitable);
  co_return 0;
}

int main(int argc, char** argv) {
  std::string role = argc > 1 ? argv[1] : "";
  if ((role != "server" && role != "client") || argc < 5) {
    std::cerr << "usage: kv_lookup server ADDR PORT KEY=VALUE...\n"
                 "       kv_lookup client ADDR PORT KEY...\n";
    return 2;
  }
  std::vector<std::string> args(argv + 4, argv + argc);
  for (const auto& a : args) {
    auto key_length = role == "server" ? a.find('=') : a.size();
    bool ok = key_length >= 1 && key_length <= key_size &&
              (role == "client" ||
               (key_length != std::string::npos && a.size() - key_length - 1 <= value_size));
    if (!ok) {
      std::cerr << "kv_lookup: keys of 1.." << key_size << " bytes, values of up to " << value_size
                << " (server: KEY=VALUE): '" << a << "'\n";
      return 2;
    }
  }
  try {
    asio::io_context io;
    int status = 0;
    if (role == "server") {
      asio_rdma::acceptor acceptor(io.get_executor(), argv[2], std::stoi(argv[3]));
      asio::co_spawn(io, serve(acceptor, args), asio::detached);
      std::cout << "kv_lookup: serving " << args.size() << " entries" << std::endl;
      asio::signal_set signals(io, SIGINT, SIGTERM);
      signals.async_wait([&](auto, int) { io.stop(); });
      io.run();
    } else {
      asio::co_spawn(io, lookup(io.get_executor(), argv[2], std::stoi(argv[3]), args),
                     [&](std::exception_ptr e, int rc) {
                       status = rc;
                       if (e) {
                         try {
                           std::rethrow_exception(e);
                         } catch (const std::exception& x) {
                           std::cerr << "kv_lookup: " << x.what() << "\n";
                         }
                         status = 1;
                       }
                     });
      io.run();
    }
    return status;
  } catch (const std::exception& e) {
    std::cerr << "kv_lookup: " << e.what() << "\n";
    return 1;
  }
}
