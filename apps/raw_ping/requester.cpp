#include "frames.hpp"
#include "modes.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

namespace raw_ping {

namespace asio = boost::asio;
using clock = std::chrono::system_clock;

namespace {

asio::awaitable<void> send_one(asio_rdma::raw_socket& socket,
                               const std::function<std::size_t(std::span<std::byte>)>& fill) {
  auto batch = co_await socket.async_acquire(1, asio::use_awaitable);
  batch[0].length = fill(batch[0].buffer());
  co_await socket.async_send(std::move(batch), asio::use_awaitable);
}

// Frames until the deadline; returns the first for which `accept` returns true (and the time it
// arrived), or nothing on timeout or stop.
template <typename Accept>
asio::awaitable<std::optional<clock::time_point>> receive_until(asio_rdma::raw_socket& socket,
                                                                clock::time_point deadline,
                                                                const bool& stop, Accept accept) {
  while (!stop) {
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero())
      break;
    // Short slices so that SIGINT is noticed promptly.
    const auto slice = std::min<clock::duration>(left, std::chrono::milliseconds(100));
    auto [ec, batch] = co_await socket.async_receive(
        16, std::chrono::duration_cast<std::chrono::nanoseconds>(slice),
        asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::timed_out)
      continue;
    if (ec)
      throw boost::system::system_error(ec, "receive");
    for (const auto& packet : batch)
      if (accept(packet))
        co_return socket.caps().receive_timestamps ? packet.timestamp : clock::now();
  }
  co_return std::nullopt;
}

} // namespace

asio::awaitable<int> run_requester(asio_rdma::raw_socket& socket, const options& opts,
                                   const bool& stop) {
  const mac_address mac = opts.mac.value_or(socket.interface_mac());
  asio_rdma::flow_rule arp;
  arp.ethertype = asio_rdma::ethertype::arp;
  asio_rdma::flow_rule from_peer;
  from_peer.ipv4_source = opts.to;
  from_peer.ipv4_destination = opts.ip;
  auto arp_flow = socket.add_flow(arp);
  auto echo_flow = socket.add_flow(from_peer);

  // Resolve the peer's MAC address.
  std::optional<mac_address> peer;
  for (int attempt = 0; attempt < 3 && !peer && !stop; ++attempt) {
    co_await send_one(socket, [&](std::span<std::byte> buffer) {
      return write_arp(buffer, mac_address::broadcast(),
                       arp_message{1, mac, mac_address{}, opts.ip, opts.to});
    });
    co_await receive_until(socket, clock::now() + opts.timeout, stop,
                           [&](const asio_rdma::received_packet& packet) {
                             auto m = parse_arp(packet.data);
                             if (m && m->operation == 2 && m->sender_ip == opts.to)
                               peer = m->sender_mac;
                             return peer.has_value();
                           });
  }
  if (!peer) {
    std::cerr << "raw_ping: no ARP reply from " << opts.to << " on " << opts.interface << "\n";
    co_return 2;
  }

  constexpr std::size_t data_length = 56;
  const auto identifier = static_cast<std::uint16_t>(::getpid());
  std::printf("PING %s from %s %s (%s): %zu data bytes\n", opts.to.to_string().c_str(),
              opts.ip.to_string().c_str(), opts.interface.c_str(), to_string(*peer).c_str(),
              data_length);
  std::fflush(stdout);
  unsigned sent = 0, received = 0;
  double min = 1e300, max = 0, sum = 0, sum_squares = 0;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  for (std::uint16_t sequence = 1; !stop && (opts.count == 0 || sent < opts.count); ++sequence) {
    const auto start = std::chrono::steady_clock::now();
    const auto sent_at = clock::now();
    co_await send_one(socket, [&](std::span<std::byte> buffer) {
      return write_echo_request(buffer, mac, *peer, opts.ip, opts.to, identifier, sequence,
                                data_length);
    });
    ++sent;
    std::optional<echo_message> reply;
    const auto arrived = co_await receive_until(
        socket, sent_at + opts.timeout, stop, [&](const asio_rdma::received_packet& packet) {
          auto m = parse_echo(packet.data);
          if (m && m->type == 0 && m->identifier == identifier && m->sequence == sequence)
            reply = m;
          return reply.has_value();
        });
    if (arrived) {
      const double ms = std::chrono::duration<double, std::milli>(*arrived - sent_at).count();
      ++received;
      min = std::min(min, ms);
      max = std::max(max, ms);
      sum += ms;
      sum_squares += ms * ms;
      std::printf("%zu bytes from %s: icmp_seq=%u ttl=%u time=%.3f ms\n", reply->icmp_length,
                  opts.to.to_string().c_str(), sequence, reply->ttl, ms);
    } else if (!stop) {
      std::printf("no reply from %s: icmp_seq=%u\n", opts.to.to_string().c_str(), sequence);
    }
    std::fflush(stdout);
    if (!stop && (opts.count == 0 || sent < opts.count)) {
      pause.expires_at(start + opts.interval);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  std::printf("\n--- %s raw_ping statistics ---\n", opts.to.to_string().c_str());
  std::printf("%u packets transmitted, %u received, %.0f%% packet loss\n", sent, received,
              sent ? 100.0 * (sent - received) / sent : 0.0);
  if (received > 0) {
    const double avg = sum / received;
    std::printf("rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms\n", min, avg, max,
                std::sqrt(std::max(0.0, sum_squares / received - avg * avg)));
  }
  std::fflush(stdout);
  co_return received > 0 ? 0 : 1;
}

} // namespace raw_ping
