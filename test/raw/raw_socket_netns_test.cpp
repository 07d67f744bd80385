// raw_socket end to end on a veth pair between two namespaces created by the test (needs
// root): flow rules select frames, VLAN rules, rule removal, timeouts, cancellation, send and
// flush, multicast membership, completion tokens.
#define BOOST_TEST_MODULE raw_socket_netns
#include <boost/test/unit_test.hpp>

#include "raw_test_support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include <thread>

using namespace asio_rdma;
using namespace raw_test;

namespace {

flow_rule udp_port(std::uint16_t port) {
  flow_rule rule;
  rule.protocol = ip_protocol::udp;
  rule.destination_port = port;
  return rule;
}

} // namespace

BOOST_AUTO_TEST_CASE(packet_backend_is_chosen_without_rdma_and_reports_its_caps) {
  socket_pair s;
  BOOST_TEST(s.a.is_open());
  const raw_caps& caps = s.a.caps();
  BOOST_TEST((caps.backend == raw_backend::packet));
  BOOST_TEST(!caps.steals_matching_packets);
  BOOST_TEST(caps.receive_timestamps);
  BOOST_TEST(!caps.vlan_tag_in_data);
  BOOST_TEST(caps.max_flows == 16u);
  BOOST_TEST(s.a.interface_mac() == s.mac_a());
  BOOST_TEST(s.a.interface_name() == s.net.if_a);
}

BOOST_AUTO_TEST_CASE(matching_frames_arrive_and_others_do_not) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  BOOST_TEST(flow.active());
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::uint32_t i = 0; i < 40; ++i) {
      auto spec = udp_to_a(s, i % 2 == 0 ? 5000 : 5001, i);
      if (i % 8 == 4)
        spec.protocol = 6; // TCP to 5000: another protocol
      if (i % 8 == 6)
        spec.fragment = 0x0020; // a later fragment carries no port
      frames.push_back(build_frame(spec));
    }
    frame_spec arp;
    arp.destination = mac_address::broadcast();
    arp.ethertype = ethertype::arp;
    frames.push_back(build_frame(arp));
    co_await send_frames(s.b, frames);
    const auto received = co_await receive_until_quiet(s.a);
    std::vector<std::uint32_t> sequences;
    for (const auto& f : received) {
      BOOST_TEST(get16(&f.data[36]) == 5000);
      BOOST_TEST(f.data[23] == 17);
      sequences.push_back(sequence_of(f.data));
    }
    std::vector<std::uint32_t> expected;
    for (std::uint32_t i = 0; i < 40; i += 2)
      if (i % 8 != 4 && i % 8 != 6)
        expected.push_back(i);
    BOOST_TEST(sequences == expected, boost::test_tools::per_element());
  }());
  BOOST_TEST(s.a.statistics().received == 10u);
  BOOST_TEST(s.b.statistics().sent == 41u);
}

BOOST_AUTO_TEST_CASE(vlan_rules_match_the_vlan_id_from_kernel_metadata) {
  socket_pair s;
  flow_rule on_vlan_7 = udp_port(5000);
  on_vlan_7.vlan_id = 7;
  auto flow = s.a.add_flow(on_vlan_7);
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::uint32_t i = 0; i < 12; ++i) {
      auto spec = udp_to_a(s, 5000, i);
      switch (i % 4) {
      case 0:
        spec.vlan_tci = 7;
        break;
      case 1:
        spec.vlan_tci = 0xe007;
        break; // priority 7, VLAN 7
      case 2:
        spec.vlan_tci = 8;
        break;
      case 3:
        break; // untagged
      }
      frames.push_back(build_frame(spec));
    }
    co_await send_frames(s.b, frames);
    const auto received = co_await receive_until_quiet(s.a);
    BOOST_REQUIRE(received.size() == 6u);
    for (std::size_t k = 0; k < received.size(); ++k) {
      const auto& f = received[k];
      BOOST_REQUIRE(f.vlan_tci.has_value());
      BOOST_TEST((*f.vlan_tci & 0x0fff) == 7);
      BOOST_TEST(*f.vlan_tci == (k % 2 == 0 ? 7 : 0xe007));
      BOOST_TEST(get16(&f.data[12]) == ethertype::ipv4); // tag is metadata, not data
    }
  }());

  // Without a VLAN field, tagged and untagged frames both match and report their tag.
  s.a.set_flow(flow.index(), udp_port(5000));
  BOOST_TEST(!flow.active()); // the slot was replaced
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    auto tagged = udp_to_a(s, 5000, 1);
    tagged.vlan_tci = 0; // VLAN 0 (priority tag) is a real tag
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000, 0), tagged));
    const auto received = co_await receive_until_quiet(s.a);
    BOOST_REQUIRE(received.size() == 2u);
    BOOST_TEST(!received[0].vlan_tci.has_value());
    BOOST_TEST(received[1].vlan_tci.value_or(0xffff) == 0);
  }());
}

BOOST_AUTO_TEST_CASE(removing_a_rule_stops_delivery) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  s.a.set_flow(5, udp_port(6000));
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000), udp_to_a(s, 6000)));
    BOOST_TEST((co_await receive_until_quiet(s.a)).size() == 2u);

    flow = flow_handle(); // RAII removal
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000), udp_to_a(s, 6000)));
    auto received = co_await receive_until_quiet(s.a);
    BOOST_REQUIRE(received.size() == 1u);
    BOOST_TEST(get16(&received[0].data[36]) == 6000);

    s.a.clear_flow(5); // slot form
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000), udp_to_a(s, 6000)));
    BOOST_TEST((co_await receive_until_quiet(s.a)).empty());
  }());
}

BOOST_AUTO_TEST_CASE(receive_times_out_with_timed_out) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    const auto start = std::chrono::steady_clock::now();
    auto [ec, batch] = co_await s.a.async_receive(8, 150ms, asio::as_tuple(asio::use_awaitable));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    BOOST_TEST(ec == asio::error::timed_out);
    BOOST_TEST(batch.empty());
    BOOST_TEST(elapsed >= 150ms);
    BOOST_TEST(elapsed < 2s);

    auto [ec0, none] = co_await s.a.async_receive(8, 0ms, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec0 == asio::error::timed_out); // timeout 0 polls once

    // With time left, a frame that arrives late is delivered, not an empty batch.
    asio::steady_timer later(s.io, 100ms);
    later.async_wait([&](boost::system::error_code) {
      asio::co_spawn(s.io, send_frames(s.b, frame_list(udp_to_a(s, 5000, 77))), asio::detached);
    });
    auto got = co_await s.a.async_receive(8, 5s); // default token: asio::deferred
    BOOST_REQUIRE(got.size() == 1u);
    BOOST_TEST(sequence_of(got[0]) == 77u);
  }());
}

BOOST_AUTO_TEST_CASE(per_operation_cancellation) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  asio::cancellation_signal signal;
  std::optional<boost::system::error_code> result;
  s.a.async_receive(8, asio::bind_cancellation_slot(
                           signal.slot(), [&](boost::system::error_code ec, receive_batch b) {
                             result = ec;
                             BOOST_TEST(b.empty());
                           }));
  asio::steady_timer timer(s.io, 50ms);
  timer.async_wait(
      [&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
  s.io.run_for(5s);
  BOOST_REQUIRE(result.has_value());
  BOOST_TEST(*result == asio::error::operation_aborted);

  // The socket still works, and a frame that arrived meanwhile is not lost.
  s.io.restart();
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000, 5)));
    BOOST_TEST((co_await receive_until_quiet(s.a)).size() == 1u);
  }());

  // Cancelling an acquire that waits for buffers the user holds.
  s.io.restart();
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    auto all = co_await s.b.async_acquire(1000, asio::use_awaitable);
    BOOST_TEST(all.size() == s.b.caps().send_buffers);
    asio::cancellation_signal acquire_signal;
    asio::steady_timer t(s.io, 30ms);
    t.async_wait(
        [&](boost::system::error_code) { acquire_signal.emit(asio::cancellation_type::total); });
    auto [ec, none] = co_await s.b.async_acquire(
        1,
        asio::bind_cancellation_slot(acquire_signal.slot(), asio::as_tuple(asio::use_awaitable)));
    BOOST_TEST(ec == asio::error::operation_aborted);
    BOOST_TEST(none.empty());
    all.release();
    auto one = co_await s.b.async_acquire(1, asio::use_awaitable);
    BOOST_TEST(one.size() == 1u);
  }());
}

BOOST_AUTO_TEST_CASE(send_and_flush_deliver_in_order) {
  raw_socket_options options;
  options.send_buffers = 16; // fewer buffers than frames: acquire has to wait and reuse
  socket_pair s(options);
  auto flow = s.a.add_flow(udp_port(5000));
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::uint32_t i = 0; i < 200; ++i)
      frames.push_back(build_frame(udp_to_a(s, 5000, i)));
    co_await send_frames(s.b, frames);
    const auto received = co_await receive_until_quiet(s.a);
    BOOST_REQUIRE(received.size() == 200u);
    for (std::uint32_t i = 0; i < 200; ++i)
      BOOST_TEST(sequence_of(received[i].data) == i);
  }());
}

BOOST_AUTO_TEST_CASE(invalid_sends_and_concurrent_operations_fail_clearly) {
  socket_pair s;
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    auto batch = co_await s.b.async_acquire(2, asio::use_awaitable);
    batch[0].length = 10; // shorter than an Ethernet header
    batch[1].length = 60;
    auto [ec] = co_await s.b.async_send(std::move(batch), asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == asio::error::invalid_argument);
    auto again = co_await s.b.async_acquire(1000, asio::use_awaitable);
    BOOST_TEST(again.size() == s.b.caps().send_buffers); // nothing leaked
    again[0].length = again[0].buffer().size() + 1;
    again.truncate(1);
    auto [ec2] = co_await s.b.async_send(std::move(again), asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec2 == asio::error::invalid_argument);

    auto [ec3, b0] = co_await s.a.async_receive(0, 10ms, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec3 == asio::error::invalid_argument);
  }());
  s.io.restart();
  std::optional<boost::system::error_code> first, second;
  s.a.async_receive(4, 100ms, [&](boost::system::error_code ec, receive_batch) { first = ec; });
  s.a.async_receive(4, 100ms, [&](boost::system::error_code ec, receive_batch) { second = ec; });
  s.io.run_for(5s);
  BOOST_TEST(first.value_or(boost::system::error_code()) == asio::error::timed_out);
  BOOST_TEST(second.value_or(boost::system::error_code()) == asio::error::already_started);
}

BOOST_AUTO_TEST_CASE(flow_rule_errors) {
  socket_pair s;
  error_code ec;
  flow_rule bad;
  bad.destination_port = 53; // no protocol
  s.a.add_flow(bad, ec);
  BOOST_TEST(ec == errc::invalid_option);
  s.a.set_flow(16, udp_port(1), ec);
  BOOST_TEST(ec == errc::too_many_flows);
  std::vector<flow_handle> handles;
  for (int i = 0; i < 16; ++i)
    handles.push_back(s.a.add_flow(udp_port(static_cast<std::uint16_t>(1000 + i))));
  s.a.add_flow(udp_port(1), ec);
  BOOST_TEST(ec == errc::too_many_flows);
  BOOST_CHECK_THROW(s.a.add_flow(udp_port(1)), boost::system::system_error);
  handles.pop_back();
  s.a.add_flow(udp_port(1), ec);
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE(a_multicast_rule_joins_and_leaves_the_group) {
  socket_pair s;
  const std::string show = "ip netns exec " + s.net.ns_a + " ip maddr show dev " + s.net.if_a;
  BOOST_TEST(capture(show).find("239.1.2.3") == std::string::npos);
  flow_rule group;
  group.ipv4_destination = parse_ipv4_address("239.1.2.3");
  group.protocol = ip_protocol::udp;
  {
    auto flow = s.a.add_flow(group);
    const auto joined = capture(show);
    BOOST_TEST(joined.find("239.1.2.3") != std::string::npos);
    BOOST_TEST(joined.find("01:00:5e:01:02:03") != std::string::npos);
    run_coroutine(s.io, [&]() -> asio::awaitable<void> {
      auto spec = udp_to_a(s, 5000, 9);
      spec.destination = parse_mac_address("01:00:5e:01:02:03");
      spec.ip_destination = 0xef010203;
      co_await send_frames(s.b, frame_list(spec, udp_to_a(s, 5000)));
      const auto received = co_await receive_until_quiet(s.a);
      BOOST_REQUIRE(received.size() == 1u);
      BOOST_TEST(sequence_of(received[0].data) == 9u);
    }());
  }
  BOOST_TEST(capture(show).find("239.1.2.3") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(holding_batches_while_receiving_more) {
  raw_socket_options options;
  options.receive_buffers = 64;
  socket_pair s(options);
  auto flow = s.a.add_flow(udp_port(5000));
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000, 1)));
    auto held = co_await s.a.async_receive(8, 2s, asio::use_awaitable);
    BOOST_REQUIRE(held.size() == 1u);
    // While `held` pins its ring block, later frames still arrive.
    std::vector<receive_batch> batches;
    for (std::uint32_t i = 2; i < 6; ++i) {
      co_await send_frames(s.b, frame_list(udp_to_a(s, 5000, i)));
      batches.push_back(co_await s.a.async_receive(8, 2s, asio::use_awaitable));
      BOOST_REQUIRE(batches.back().size() == 1u);
    }
    BOOST_TEST(sequence_of(held[0]) == 1u); // untouched
  }());
}

BOOST_AUTO_TEST_CASE(completion_tokens_callbacks_futures_deferred) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  run_coroutine(s.io, send_frames(s.b, frame_list(udp_to_a(s, 5000, 1), udp_to_a(s, 5000, 2),
                                                  udp_to_a(s, 5000, 3))));
  s.io.restart();
  // A callback.
  std::size_t via_callback = 0;
  s.a.async_receive(1, 2s, [&](boost::system::error_code ec, receive_batch b) {
    BOOST_TEST(!ec);
    via_callback = b.size();
  });
  s.io.run_for(3s);
  BOOST_TEST(via_callback == 1u);
  // asio::deferred, launched with a callback.
  s.io.restart();
  std::size_t via_deferred = 0;
  auto op = s.a.async_receive(1, 2s, asio::deferred);
  std::move(op)([&](boost::system::error_code ec, receive_batch b) {
    BOOST_TEST(!ec);
    via_deferred = b.size();
  });
  s.io.run_for(3s);
  BOOST_TEST(via_deferred == 1u);
  // use_future, with the io_context on another thread.
  s.io.restart();
  auto work = asio::make_work_guard(s.io);
  std::thread runner([&] { s.io.run_for(5s); });
  auto future = s.a.async_receive(1, 2s, asio::use_future);
  BOOST_TEST(future.get().size() == 1u);
  work.reset();
  runner.join();
}

BOOST_AUTO_TEST_CASE(close_aborts_outstanding_operations) {
  socket_pair s;
  std::optional<boost::system::error_code> result;
  s.a.async_receive(8, [&](boost::system::error_code ec, receive_batch) { result = ec; });
  asio::steady_timer t(s.io, 30ms);
  t.async_wait([&](boost::system::error_code) { s.a.close(); });
  s.io.run_for(5s);
  BOOST_TEST(result.value_or(boost::system::error_code()) == asio::error::operation_aborted);
  BOOST_TEST(!s.a.is_open());
  s.io.restart();
  std::optional<boost::system::error_code> after;
  s.a.async_receive(8, [&](boost::system::error_code ec, receive_batch) { after = ec; });
  s.io.run_for(1s);
  BOOST_TEST(after.value_or(boost::system::error_code()) == asio::error::bad_descriptor);
}

BOOST_AUTO_TEST_CASE(verbs_backend_on_veth_fails_clearly) {
  netns_pair net;
  asio::io_context io;
  scoped_netns in(net.ns_a);
  raw_socket_options options;
  options.backend = raw_backend::verbs;
  error_code ec;
  auto socket = raw_socket::open(io.get_executor(), net.if_a, options, ec);
  BOOST_TEST((ec == errc::no_device || ec == errc::raw_packet_unsupported), ec.message());
  BOOST_TEST(!socket.is_open());
}

BOOST_AUTO_TEST_CASE(long_frames_are_truncated_to_max_packet_size_with_their_wire_length) {
  socket_pair s;
  raw_socket_options small;
  small.max_packet_size = 128;
  {
    scoped_netns in(s.net.ns_a);
    s.a = raw_socket::open(s.io.get_executor(), s.net.if_a, small);
  }
  auto flow = s.a.add_flow(udp_port(5000));
  auto long_spec = udp_to_a(s, 5000, 1);
  long_spec.payload = 1000;
  const auto long_frame = build_frame(long_spec);
  const auto short_frame = build_frame(udp_to_a(s, 5000, 2));
  BOOST_REQUIRE(long_frame.size() == 1042u);
  BOOST_REQUIRE(short_frame.size() <= 128u);
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    co_await send_frames(s.b, frame_list(long_spec, udp_to_a(s, 5000, 2)));
    std::vector<std::pair<std::vector<std::uint8_t>, std::size_t>> got; // data, wire_length
    while (got.size() < 2) {
      auto batch = co_await s.a.async_receive(8, 2s, asio::use_awaitable);
      for (const auto& packet : batch) {
        auto* bytes = reinterpret_cast<const std::uint8_t*>(packet.data.data());
        got.emplace_back(std::vector<std::uint8_t>(bytes, bytes + packet.data.size()),
                         packet.wire_length);
      }
    }
    BOOST_REQUIRE(got.size() == 2u);
    // The long frame: its first 128 bytes, and its length on the wire.
    BOOST_TEST(got[0].first.size() == 128u);
    BOOST_TEST(got[0].second == long_frame.size());
    BOOST_TEST(
        (got[0].first == std::vector<std::uint8_t>(long_frame.begin(), long_frame.begin() + 128)));
    // The short one whole.
    BOOST_TEST(got[1].first.size() == short_frame.size());
    BOOST_TEST(got[1].second == short_frame.size());
    BOOST_TEST((got[1].first == short_frame));
  }());
}

BOOST_AUTO_TEST_CASE(released_receive_buffers_receive_again) {
  raw_socket_options options;
  options.receive_buffers = 16; // room for 16 frames of 2048 bytes
  socket_pair s(options);
  auto flow = s.a.add_flow(udp_port(5000));
  constexpr std::uint32_t rounds = 10, per_round = 12;
  run_coroutine(
      s.io,
      [&]() -> asio::awaitable<void> {
        // Ten times the ring's capacity in large frames, a round at a time: every
        // round fits only because the previous round's buffers came back.
        for (std::uint32_t round = 0; round < rounds; ++round) {
          std::vector<std::vector<std::uint8_t>> frames;
          for (std::uint32_t i = 0; i < per_round; ++i) {
            auto spec = udp_to_a(s, 5000, round * per_round + i);
            spec.payload = 1400; // within the veth MTU; two frames per 4 KiB ring block
            frames.push_back(build_frame(spec));
          }
          co_await send_frames(s.b, frames);
          const auto received = co_await receive_until_quiet(s.a);
          BOOST_REQUIRE_MESSAGE(received.size() == per_round,
                                "round " << round << ": " << received.size() << " frames");
          for (std::uint32_t i = 0; i < per_round; ++i)
            BOOST_TEST(sequence_of(received[i].data) == round * per_round + i);
        }
      }(),
      60s);
  BOOST_TEST(s.a.statistics().received == rounds * per_round);
  BOOST_TEST(s.a.statistics().receive_dropped == 0u);
}

BOOST_AUTO_TEST_CASE(lent_batches_stay_valid_after_close_and_after_the_socket_is_gone) {
  socket_pair s;
  auto flow = s.a.add_flow(udp_port(5000));
  receive_batch received;
  send_batch acquired;
  const auto frame = build_frame(udp_to_a(s, 5000, 77));
  run_coroutine(s.io, [&]() -> asio::awaitable<void> {
    co_await send_frames(s.b, frame_list(udp_to_a(s, 5000, 77)));
    received = co_await s.a.async_receive(8, 2s, asio::use_awaitable);
    acquired = co_await s.a.async_acquire(2, asio::use_awaitable);
  }());
  BOOST_REQUIRE(received.size() == 1u);
  BOOST_REQUIRE(!acquired.empty());
  auto same_frame = [&] {
    const auto& data = received[0].data;
    return data.size() == frame.size() && std::memcmp(data.data(), frame.data(), frame.size()) == 0;
  };
  s.a.close();
  BOOST_TEST(!s.a.is_open());
  BOOST_TEST(same_frame()); // the received frame is still there after close()...
  std::memset(acquired[0].buffer().data(), 0xab, acquired[0].buffer().size()); // still writable
  s.a = raw_socket();
  BOOST_TEST(same_frame()); // ...and after the socket is gone
  BOOST_TEST((acquired[0].buffer()[0] == std::byte{0xab}));
  received.release();
  acquired.release();
  BOOST_TEST(received.empty());
  BOOST_TEST(acquired.empty());
}
