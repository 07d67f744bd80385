// Datagrams (UD queue pairs) on the device under test: peers resolved through
// rdma_cm, replies to senders, many peers to one socket, size limits,
// cancellation and close.
#define BOOST_TEST_MODULE integration_datagram
#include "rdma_test.hpp"

#include <asio_rdma/datagram_socket.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ar = asio_rdma;
namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio_rdma::test::device_address;
using asio_rdma::test::run;

namespace {

std::vector<std::byte> text(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

std::string as_string(const std::vector<std::byte>& buf, std::size_t n) {
  return std::string(reinterpret_cast<const char*>(buf.data()), n);
}

/// iWARP has no datagrams: there a socket is refused with errc::operation_not_supported
/// (checked here) and the test, which needs datagrams, ends.
bool datagrams_or_their_refusal() {
  if (ar::test::device_under_test().datagrams)
    return true;
  asio::io_context io;
  ar::error_code ec;
  ar::datagram_socket refused(io.get_executor(), ar::test::device_address(), 0, {}, ec);
  BOOST_TEST((ec == ar::errc::operation_not_supported), ec.message());
  BOOST_TEST(ar::test::names_the_device(ec, "datagrams"), ec.message());
  BOOST_TEST(!refused.is_open());
  return false;
}

} // namespace

BOOST_AUTO_TEST_CASE(send_and_reply_between_two_sockets) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_socket server(ex, device_address(), 0);
    ar::datagram_socket client(ex, device_address(), 0);
    BOOST_TEST(server.local_port() != 0);
    BOOST_TEST(server.local_port() != client.local_port());
    BOOST_TEST(server.max_message_size() >= 256u);
    BOOST_TEST_MESSAGE("max_message_size " << server.max_message_size());

    auto peer = co_await client.async_resolve(device_address(), server.local_port(), use_awaitable);
    BOOST_TEST(peer.qp_num == server.local_endpoint().qp_num);
    BOOST_TEST(peer.address.to_string() == device_address());

    std::vector<std::byte> buf(server.max_message_size());
    auto msg = text("hello datagram");
    auto sent = co_await client.async_send_to(asio::buffer(msg), peer, use_awaitable);
    BOOST_TEST(sent == msg.size());
    auto [n, sender] = co_await server.async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(as_string(buf, n) == "hello datagram");
    BOOST_TEST(sender.qp_num == client.local_endpoint().qp_num);
    BOOST_TEST(sender.address.to_string() == device_address());
    BOOST_TEST((sender == client.local_endpoint()));

    // A reply to the sender (its address handle is made from the received GID).
    auto reply = text("hello back");
    co_await server.async_send_to(asio::buffer(reply), sender, use_awaitable);
    auto [m, from] = co_await client.async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(as_string(buf, m) == "hello back");
    BOOST_TEST(from.qp_num == server.local_endpoint().qp_num);

    // A gather list on send, a scatter list on receive.
    auto a = text("part one, "), b = text("part two");
    std::array<asio::const_buffer, 2> gather{asio::buffer(a), asio::buffer(b)};
    co_await client.async_send_to(gather, peer, use_awaitable);
    std::vector<std::byte> first(4), rest(64);
    std::array<asio::mutable_buffer, 2> scatter{asio::buffer(first), asio::buffer(rest)};
    auto [k, ignored] = co_await server.async_receive_from(scatter, use_awaitable);
    BOOST_TEST(k == a.size() + b.size());
    BOOST_TEST(as_string(first, 4) + as_string(rest, k - 4) == "part one, part two");
  });
}

BOOST_AUTO_TEST_CASE(many_peers_to_one_socket) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_socket server(ex, device_address(), 0);
    constexpr int peers = 8, each = 10;
    std::vector<std::unique_ptr<ar::datagram_socket>> clients;
    std::map<std::uint32_t, int> index_of_qp;
    for (int i = 0; i < peers; ++i) {
      clients.push_back(std::make_unique<ar::datagram_socket>(ex, device_address(), 0));
      index_of_qp[clients.back()->local_endpoint().qp_num] = i;
    }
    BOOST_REQUIRE(index_of_qp.size() == std::size_t(peers));
    for (int i = 0; i < peers; ++i) {
      auto peer =
          co_await clients[i]->async_resolve(device_address(), server.local_port(), use_awaitable);
      for (int j = 0; j < each; ++j) {
        auto msg = text(std::to_string(i) + ":" + std::to_string(j));
        co_await clients[i]->async_send_to(asio::buffer(msg), peer, use_awaitable);
      }
    }
    std::map<int, std::vector<int>> got;
    std::vector<std::byte> buf(64);
    for (int k = 0; k < peers * each; ++k) {
      auto [n, sender] = co_await server.async_receive_from(asio::buffer(buf), use_awaitable);
      const auto s = as_string(buf, n);
      const int i = std::stoi(s.substr(0, s.find(':')));
      BOOST_TEST(index_of_qp.at(sender.qp_num) == i);
      got[i].push_back(std::stoi(s.substr(s.find(':') + 1)));
      auto reply = text("ack " + s);
      co_await server.async_send_to(asio::buffer(reply), sender, use_awaitable);
    }
    for (int i = 0; i < peers; ++i) {
      BOOST_TEST(got[i].size() == std::size_t(each));
      for (int j = 0; j < each; ++j) {
        auto [n, from] = co_await clients[i]->async_receive_from(asio::buffer(buf), use_awaitable);
        BOOST_TEST(as_string(buf, n).rfind("ack " + std::to_string(i) + ":", 0) == 0);
        BOOST_TEST(from.qp_num == server.local_endpoint().qp_num);
      }
    }
  });
}

BOOST_AUTO_TEST_CASE(sizes_up_to_the_mtu_and_no_further) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_socket server(ex, device_address(), 0);
    ar::datagram_socket client(ex, device_address(), 0);
    const auto mtu = client.max_message_size();
    auto peer = co_await client.async_resolve(device_address(), server.local_port(), use_awaitable);
    std::vector<std::byte> big(mtu + 1);
    for (std::size_t i = 0; i < big.size(); ++i)
      big[i] = ar::test::pattern(3, i);
    auto [ec, n] =
        co_await client.async_send_to(asio::buffer(big), peer, asio::as_tuple(use_awaitable));
    BOOST_TEST((ec == ar::errc::message_too_large), ec.message());
    BOOST_TEST(n == 0u);

    // Exactly the MTU arrives whole.
    auto sent = co_await client.async_send_to(asio::buffer(big.data(), mtu), peer, use_awaitable);
    BOOST_TEST(sent == mtu);
    // Too small a buffer: refused, the datagram stays queued for a larger one.
    std::vector<std::byte> small(16), buf(mtu);
    auto [ec2, n2, s2] =
        co_await server.async_receive_from(asio::buffer(small), asio::as_tuple(use_awaitable));
    BOOST_TEST((ec2 == ar::errc::buffer_too_small), ec2.message());
    auto [m, sender] = co_await server.async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(m == mtu);
    BOOST_TEST(std::memcmp(buf.data(), big.data(), mtu) == 0);
  });
}

BOOST_AUTO_TEST_CASE(cancel_close_and_nobody_listening) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_socket sock(ex, device_address(), 0);
    std::vector<std::byte> buf(64);

    // Per-operation cancellation of a waiting receive.
    asio::cancellation_signal signal;
    asio::steady_timer timer(ex, std::chrono::milliseconds(50));
    timer.async_wait([&](auto) { signal.emit(asio::cancellation_type::terminal); });
    auto [ec, n, s] = co_await sock.async_receive_from(
        asio::buffer(buf),
        asio::bind_cancellation_slot(signal.slot(), asio::as_tuple(use_awaitable)));
    BOOST_TEST((ec == asio::error::operation_aborted), ec.message());

    // The socket still works after a cancelled receive.
    ar::datagram_socket other(ex, device_address(), 0);
    auto me = co_await other.async_resolve(device_address(), sock.local_port(), use_awaitable);
    auto msg = text("after cancel");
    co_await other.async_send_to(asio::buffer(msg), me, use_awaitable);
    auto [m, from] = co_await sock.async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(as_string(buf, m) == "after cancel");

    // Nobody at that port: an error, not a hang.
    const auto unused = static_cast<std::uint16_t>(other.local_port() + 1000);
    auto [rec, ep] =
        co_await other.async_resolve(device_address(), unused, asio::as_tuple(use_awaitable));
    BOOST_TEST(rec.failed());
    BOOST_TEST_MESSAGE("resolve of an unused port: " << rec.message());
    auto [bad, ep2] =
        co_await other.async_resolve("not an address", 1, asio::as_tuple(use_awaitable));
    BOOST_TEST((bad == asio::error::invalid_argument), bad.message());

    // close() aborts a waiting receive; operations after it fail cleanly.
    bool aborted = false;
    sock.async_receive_from(asio::buffer(buf),
                            [&](ar::error_code e, std::size_t, ar::datagram_endpoint) {
                              aborted = e == asio::error::operation_aborted;
                            });
    co_await asio::post(ex, use_awaitable);
    sock.close();
    BOOST_TEST(!sock.is_open());
    for (int i = 0; i < 10 && !aborted; ++i)
      co_await asio::post(ex, use_awaitable);
    BOOST_TEST(aborted);
    auto [cec, cn] =
        co_await sock.async_send_to(asio::buffer(msg), me, asio::as_tuple(use_awaitable));
    BOOST_TEST((cec == asio::error::bad_descriptor), cec.message());
  });
}

// close() from inside a send's handler, with the socket's other sends still counted as
// posted: it returns at once and every send completes once. (It used to poll the
// completion queue until those sends were flushed, for up to 2 s on the I/O thread; from
// inside a handler that the queue's own poll was running, that poll found nothing, so it
// always waited the whole 2 s.)
BOOST_AUTO_TEST_CASE(close_from_a_send_handler_returns_at_once) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_options options;
    // Busy polling dispatches completions straight from the queue's poll, as an event
    // does: the first handler runs while the others are still in that poll's batch.
    options.completion_mode = ar::completion_mode::busy_poll;
    ar::datagram_socket sender(ex, device_address(), 0, options);
    ar::datagram_socket receiver(ex, device_address(), 0);
    auto peer = co_await sender.async_resolve(device_address(), receiver.local_port(), use_awaitable);
    auto msg = text("closing");
    constexpr int sends = 8;
    int completed = 0;
    std::chrono::steady_clock::duration close_took{};
    for (int i = 0; i < sends; ++i)
      sender.async_send_to(asio::buffer(msg), peer, [&](ar::error_code ec, std::size_t) {
        BOOST_TEST((!ec || ec == asio::error::operation_aborted), ec.message());
        if (completed++ == 0) {
          const auto start = std::chrono::steady_clock::now();
          sender.close();
          close_took = std::chrono::steady_clock::now() - start;
        }
      });
    asio::steady_timer t(ex);
    for (int i = 0; i < 2000 && completed < sends; ++i) {
      t.expires_after(std::chrono::milliseconds(1));
      co_await t.async_wait(use_awaitable);
    }
    BOOST_TEST(completed == sends);
    BOOST_TEST(!sender.is_open());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(close_took).count();
    BOOST_TEST_MESSAGE("close() from a send handler took " << ms << " ms");
    BOOST_TEST(ms < 200);
    // Nothing more arrives for the sends close() dealt with.
    for (int i = 0; i < 20; ++i)
      co_await asio::post(ex, use_awaitable);
    BOOST_TEST(completed == sends);
  });
}

BOOST_AUTO_TEST_CASE(a_resolve_is_cancelled_alone_and_the_socket_stays_usable) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    ar::datagram_socket server(ex, device_address(), 0);
    ar::datagram_socket client(ex, device_address(), 0);

    // Cancelled before any rdma_cm event is handled (no io_context turn in between):
    // aborted, posted, and a later emit reaches nothing.
    asio::cancellation_signal signal;
    ar::error_code result = asio::error::would_block;
    bool inside_call = true, ran_inside = false;
    int completions = 0;
    client.async_resolve(device_address(), server.local_port(),
                         asio::bind_cancellation_slot(
                             signal.slot(), [&](ar::error_code ec, ar::datagram_endpoint) {
                               result = ec;
                               ran_inside = inside_call;
                               ++completions;
                             }));
    signal.emit(asio::cancellation_type::terminal);
    inside_call = false;
    for (int i = 0; i < 100 && completions == 0; ++i)
      co_await asio::post(ex, use_awaitable);
    BOOST_TEST(completions == 1);
    BOOST_TEST((result == asio::error::operation_aborted), result.message());
    BOOST_TEST(!ran_inside);
    // The slot keeps any_completion_handler's forwarding handler (Asio's
    // cancellation_state), whose target the completion removed: emitting again
    // reaches no resolver (none is left to touch) and completes nothing.
    signal.emit(asio::cancellation_type::terminal);
    co_await asio::post(ex, use_awaitable);
    BOOST_TEST(completions == 1);

    // A partial cancellation withdraws it too.
    asio::cancellation_signal partial;
    ar::error_code partial_result = asio::error::would_block;
    client.async_resolve(device_address(), server.local_port(),
                         asio::bind_cancellation_slot(
                             partial.slot(), [&](ar::error_code ec, ar::datagram_endpoint) {
                               partial_result = ec;
                               ++completions;
                             }));
    partial.emit(asio::cancellation_type::partial);
    for (int i = 0; i < 100 && completions == 1; ++i)
      co_await asio::post(ex, use_awaitable);
    BOOST_TEST((partial_result == asio::error::operation_aborted), partial_result.message());

    // The socket is still usable: a resolve not cancelled succeeds and its endpoint
    // carries a datagram.
    auto peer = co_await client.async_resolve(device_address(), server.local_port(), use_awaitable);
    auto msg = text("after a cancelled resolve");
    co_await client.async_send_to(asio::buffer(msg), peer, use_awaitable);
    std::vector<std::byte> buf(server.max_message_size());
    auto [n, from] = co_await server.async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(as_string(buf, n) == "after a cancelled resolve");
    BOOST_TEST(from.qp_num == client.local_endpoint().qp_num);
  });
}

BOOST_AUTO_TEST_CASE(bad_address_and_options) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  ar::error_code ec;
  ar::datagram_socket s1(io.get_executor(), "192.0.2.77", 0, ar::datagram_options(), ec);
  BOOST_TEST(ec.failed());
  BOOST_TEST(!s1.is_open());
  BOOST_TEST_MESSAGE("bind to an address nobody has: " << ec.message());
  ar::datagram_options bad;
  bad.receive_depth = 0;
  ar::datagram_socket s2(io.get_executor(), device_address(), 0, bad, ec);
  BOOST_TEST((ec == ar::errc::invalid_option), ec.message());
  BOOST_CHECK_THROW(ar::datagram_socket(io.get_executor(), "nonsense", 0),
                    boost::system::system_error);
}

namespace {

// A receive that gives up after `limit`: (error, bytes).
awaitable<std::pair<ar::error_code, std::size_t>> receive_within(ar::datagram_socket& s,
                                                                 std::vector<std::byte>& buf,
                                                                 std::chrono::milliseconds limit) {
  auto ex = co_await asio::this_coro::executor;
  asio::cancellation_signal signal;
  asio::steady_timer timer(ex, limit);
  timer.async_wait([&](ar::error_code e) {
    if (!e)
      signal.emit(asio::cancellation_type::terminal);
  });
  auto [ec, n, from] = co_await s.async_receive_from(
      asio::buffer(buf),
      asio::bind_cancellation_slot(signal.slot(), asio::as_tuple(use_awaitable)));
  timer.cancel();
  co_return std::make_pair(ec, n);
}

} // namespace

BOOST_AUTO_TEST_CASE(multicast_to_several_receivers_join_and_leave) {
  if (!datagrams_or_their_refusal())
    return;
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    const std::string group = "239.1.2.3";
    std::vector<std::unique_ptr<ar::datagram_socket>> receivers;
    for (int i = 0; i < 3; ++i) {
      receivers.push_back(std::make_unique<ar::datagram_socket>(ex, device_address(), 0));
      auto joined = co_await receivers.back()->async_join(group, use_awaitable);
      BOOST_TEST(joined.address.to_string() == group);
    }
    ar::datagram_socket sender(ex, device_address(), 0);
    auto to_group = co_await sender.async_join(group, use_awaitable);
    BOOST_TEST(to_group.qp_num == 0xffffffu);
    BOOST_TEST_MESSAGE("group qkey " << std::hex << to_group.qkey);

    // Joining twice is refused; a unicast address is not a group.
    auto [twice, e1] = co_await sender.async_join(group, asio::as_tuple(use_awaitable));
    BOOST_TEST((twice == asio::error::already_connected), twice.message());
    auto [unicast, e2] =
        co_await sender.async_join(device_address(), asio::as_tuple(use_awaitable));
    BOOST_TEST((unicast == asio::error::invalid_argument), unicast.message());

    constexpr int count = 5;
    for (int j = 0; j < count; ++j) {
      auto msg = text("to all " + std::to_string(j));
      co_await sender.async_send_to(asio::buffer(msg), to_group, use_awaitable);
    }
    std::vector<std::byte> buf(256);
    for (auto& r : receivers) {
      std::vector<int> seen;
      for (int j = 0; j < count; ++j) {
        auto [n, from] = co_await r->async_receive_from(asio::buffer(buf), use_awaitable);
        const auto s = as_string(buf, n);
        BOOST_TEST(s.rfind("to all ", 0) == 0u);
        BOOST_TEST(from.qp_num == sender.local_endpoint().qp_num);
        seen.push_back(std::stoi(s.substr(7)));
      }
      std::sort(seen.begin(), seen.end());
      BOOST_TEST(seen == (std::vector<int>{0, 1, 2, 3, 4}));
    }

    // Receiver 0 leaves: the others still get the group's datagrams, it does not.
    receivers[0]->leave(group);
    auto msg = text("after leave");
    co_await sender.async_send_to(asio::buffer(msg), to_group, use_awaitable);
    for (int i = 1; i < 3; ++i) {
      auto [n, from] = co_await receivers[i]->async_receive_from(asio::buffer(buf), use_awaitable);
      BOOST_TEST(as_string(buf, n) == "after leave");
    }
    auto [ec, n] = co_await receive_within(*receivers[0], buf, std::chrono::milliseconds(500));
    BOOST_TEST((ec == asio::error::operation_aborted),
               "receiver 0 got " << n << " bytes: " << ec.message());
    // Leaving again, or a group never joined, is an error.
    ar::error_code lec;
    receivers[0]->leave(group, lec);
    BOOST_TEST((lec == asio::error::not_found), lec.message());
    BOOST_CHECK_THROW(receivers[1]->leave("239.9.9.9"), boost::system::system_error);

    // Join again after leaving; destruction leaves the remaining groups.
    co_await receivers[0]->async_join(group, use_awaitable);
    co_await sender.async_send_to(asio::buffer(msg), to_group, use_awaitable);
    auto [n0, f0] = co_await receivers[0]->async_receive_from(asio::buffer(buf), use_awaitable);
    BOOST_TEST(as_string(buf, n0) == "after leave");
    receivers.clear();
    co_await sender.async_send_to(asio::buffer(msg), to_group, use_awaitable);
  });
}
