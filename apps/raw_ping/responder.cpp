#include "frames.hpp"
#include "modes.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <iostream>

namespace raw_ping {

namespace asio = boost::asio;

asio::awaitable<int> run_responder(asio_rdma::raw_socket& socket, const options& opts) {
  const mac_address mac = opts.mac.value_or(socket.interface_mac());
  asio_rdma::flow_rule arp;
  arp.ethertype = asio_rdma::ethertype::arp;
  asio_rdma::flow_rule to_us;
  to_us.ipv4_destination = opts.ip; // ICMP is told apart in software: rules match UDP/TCP only
  auto arp_flow = socket.add_flow(arp);
  auto ip_flow = socket.add_flow(to_us);
  std::cout << "raw_ping responder: answering for " << opts.ip << " at " << mac << " on "
            << opts.interface << std::endl;

  unsigned replies = 0;
  for (;;) {
    auto batch = co_await socket.async_receive(32, asio::use_awaitable);
    // Answer every request of the batch with one send.
    auto out = co_await socket.async_acquire(batch.size(), asio::use_awaitable);
    std::size_t used = 0;
    for (const auto& packet : batch) {
      if (used == out.size() || (packet.vlan_tci && socket.caps().vlan_tag_in_data))
        continue;
      auto& reply = out[used];
      if (auto request = parse_arp(packet.data)) {
        if (request->operation != 1 || request->target_ip != opts.ip)
          continue;
        arp_message answer{2, mac, request->sender_mac, opts.ip, request->sender_ip};
        reply.length = write_arp(reply.buffer(), request->sender_mac, answer);
        ++used;
      } else if (auto echo = parse_echo(packet.data); echo && echo->type == 8) {
        reply.length = write_echo_reply(reply.buffer(), packet.data, mac);
        if (reply.length > 0) {
          ++used;
          ++replies;
        }
      }
    }
    batch.release();
    out.truncate(used);
    if (used > 0)
      co_await socket.async_send(std::move(out), asio::use_awaitable);
    if (opts.count != 0 && replies >= opts.count) {
      co_await socket.async_flush(asio::use_awaitable);
      co_return 0;
    }
  }
}

} // namespace raw_ping
