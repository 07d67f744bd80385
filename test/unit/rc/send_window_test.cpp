// The send queue's bookkeeping (lib/rc/send_window.hpp) without a device:
// back-pressure at the queue depth, ordering, selective signalling, what a
// completion completes, and a post the device refuses part of.
#include <boost/test/unit_test.hpp>

#include "rc/send_window.hpp"

#include <array>
#include <utility>
#include <vector>

BOOST_AUTO_TEST_SUITE(send_window_tests)

namespace {

using asio_rdma::detail::send_window;

struct request : asio_rdma::detail::queue_hook {
  ibv_send_wr wr{};
  int id = 0;
  bool message = true; // a send: takes a receive at the peer
  bool completed_at_post = false; // its handler ran when posted: nothing waits for it
  bool takes_peer_receive() const noexcept { return message; }
};

template <std::size_t N> struct fixture {
  std::array<request, N> requests;
  send_window<request> window;
  std::vector<int> prepared;

  explicit fixture(std::uint32_t depth) {
    window.set_depth(depth);
    for (std::size_t i = 0; i < N; ++i)
      requests[i].id = static_cast<int>(i);
  }
  void queue_all() {
    for (auto& r : requests)
      window.queue(&r);
  }
  // What the connection's prepare does to a send: a fresh work request that
  // asks for a completion (the window decides whether it keeps asking).
  send_window<request>::chain take() {
    return window.take([this](request* r) {
      r->wr = {};
      r->wr.wr_id = static_cast<std::uint64_t>(r->id);
      r->wr.send_flags = IBV_SEND_SIGNALED;
      prepared.push_back(r->id);
    });
  }
};

std::vector<int> ids(const ibv_send_wr* first) {
  std::vector<int> out;
  for (auto* wr = first; wr; wr = wr->next)
    out.push_back(static_cast<int>(wr->wr_id));
  return out;
}

std::vector<int> signalled(const ibv_send_wr* first) {
  std::vector<int> out;
  for (auto* wr = first; wr; wr = wr->next)
    if (wr->send_flags & IBV_SEND_SIGNALED)
      out.push_back(static_cast<int>(wr->wr_id));
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(takes_no_more_than_the_depth_in_initiation_order) {
  fixture<10> f(4);
  f.queue_all();
  auto c = f.take();
  BOOST_TEST(ids(c.first) == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(c.requests == 4u);
  BOOST_TEST(f.window.outstanding() == 4u);
  BOOST_TEST(f.window.has_queued());
  // A full window chains nothing and prepares nothing more.
  auto again = f.take();
  BOOST_TEST(!again.first);
  BOOST_TEST(again.requests == 0u);
  BOOST_TEST(f.prepared.size() == 4u);
}

BOOST_AUTO_TEST_CASE(one_request_in_sixteen_is_signalled_and_always_the_last) {
  fixture<40> f(64);
  f.queue_all();
  auto c = f.take();
  BOOST_TEST(c.requests == 40u);
  BOOST_TEST(signalled(c.first) == (std::vector<int>{15, 31, 39}), boost::test_tools::per_element());
  BOOST_TEST(c.signaled == 3u);
  // A lone request that waits for its completion is signalled: the last of its chain.
  fixture<1> single(8);
  single.queue_all();
  auto one = single.take();
  BOOST_TEST(signalled(one.first) == std::vector<int>{0}, boost::test_tools::per_element());
  BOOST_TEST(one.signaled == 1u);
}

BOOST_AUTO_TEST_CASE(requests_completed_at_post_end_a_chain_unsignalled_unless_it_fills_the_window) {
  // Nothing waits for them: one in sixteen is signalled (to recycle the send queue), the
  // last is not, and no completion is on its way for the tail.
  fixture<20> f(64);
  for (auto& r : f.requests)
    r.completed_at_post = true;
  f.queue_all();
  auto c = f.take();
  BOOST_TEST(signalled(c.first) == std::vector<int>{15}, boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 20u);
  BOOST_TEST(f.window.signalled_outstanding() == 1u);
  std::vector<int> done;
  f.window.completed(&f.requests[15], IBV_WC_SUCCESS,
                     [&](request* r, ibv_wc_status) { done.push_back(r->id); });
  BOOST_TEST(done.size() == 16u);
  BOOST_TEST(f.window.outstanding() == 4u);
  BOOST_TEST(f.window.signalled_outstanding() == 0u);
  // Posted one per chain (an awaited ping-pong), they still ask one completion in sixteen.
  fixture<40> one_by_one(64);
  std::vector<int> asked;
  for (auto& r : one_by_one.requests) {
    r.completed_at_post = true;
    one_by_one.window.queue(&r);
    for (int id : signalled(one_by_one.take().first))
      asked.push_back(id);
  }
  BOOST_TEST(asked == (std::vector<int>{15, 31}), boost::test_tools::per_element());
  // A request that waits for its completion behind them: the chain's last is signalled
  // (it completes the tail too).
  fixture<3> mixed(64);
  mixed.requests[0].completed_at_post = true;
  mixed.requests[2].completed_at_post = true;
  mixed.queue_all();
  auto m = mixed.take();
  BOOST_TEST(signalled(m.first) == std::vector<int>{2}, boost::test_tools::per_element());
  // A window filled by them: its last request is signalled, so posting resumes with a
  // completion even where the depth is below the signal interval.
  fixture<6> full(4);
  for (auto& r : full.requests)
    r.completed_at_post = true;
  full.queue_all();
  auto first = full.take();
  BOOST_TEST(signalled(first.first) == std::vector<int>{3}, boost::test_tools::per_element());
  BOOST_TEST(full.window.signalled_outstanding() == 1u);
  full.window.completed(&full.requests[3], IBV_WC_SUCCESS, [](request*, ibv_wc_status) {});
  auto rest = full.take();
  BOOST_TEST(ids(rest.first) == (std::vector<int>{4, 5}), boost::test_tools::per_element());
  BOOST_TEST(signalled(rest.first).empty());
  // A flush reports every request, signalled or not: the close takes them all.
  full.window.completed(&full.requests[4], IBV_WC_WR_FLUSH_ERR, [](request*, ibv_wc_status) {});
  full.window.completed(&full.requests[5], IBV_WC_WR_FLUSH_ERR, [](request*, ibv_wc_status) {});
  BOOST_TEST(full.window.outstanding() == 0u);
  BOOST_TEST(full.window.signalled_outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(a_completion_completes_the_unsignalled_requests_before_it) {
  fixture<40> f(64);
  f.queue_all();
  f.take();
  std::vector<std::pair<int, ibv_wc_status>> done;
  auto record = [&](request* r, ibv_wc_status s) { done.emplace_back(r->id, s); };
  f.window.completed(&f.requests[15], IBV_WC_SUCCESS, record);
  BOOST_TEST_REQUIRE(done.size() == 16u);
  for (int i = 0; i < 16; ++i) {
    BOOST_TEST(done[i].first == i);
    BOOST_TEST(done[i].second == IBV_WC_SUCCESS);
  }
  BOOST_TEST(f.window.outstanding() == 24u);
  // An error on the next signalled request: the requests before it
  // succeeded, it carries the error.
  done.clear();
  f.window.completed(&f.requests[31], IBV_WC_REM_ACCESS_ERR, record);
  BOOST_TEST_REQUIRE(done.size() == 16u);
  BOOST_TEST(done.front().first == 16);
  BOOST_TEST(done[14].second == IBV_WC_SUCCESS);
  BOOST_TEST(done.back().first == 31);
  BOOST_TEST(done.back().second == IBV_WC_REM_ACCESS_ERR);
  BOOST_TEST(f.window.outstanding() == 8u);
}

BOOST_AUTO_TEST_CASE(on_iwarp_a_read_completes_only_by_its_own_completion) {
  // SoftiWARP completes a read when its response arrives, a send posted after it when
  // the send is handed to TCP: the send's completion must not complete the read.
  fixture<6> f(8);
  f.window.set_iwarp(true);
  f.queue_all();
  auto c = f.window.take([&](request* r) {
    r->wr = {};
    r->wr.wr_id = static_cast<std::uint64_t>(r->id);
    r->wr.opcode = (r->id == 1 || r->id == 2) ? IBV_WR_RDMA_READ : IBV_WR_SEND;
  });
  // Reads ask for their own completion; the chain's last request as always.
  BOOST_TEST(signalled(c.first) == (std::vector<int>{1, 2, 5}), boost::test_tools::per_element());
  BOOST_TEST(c.signaled == 3u);
  std::vector<int> done;
  auto record = [&](request* r, ibv_wc_status) { done.push_back(r->id); };
  f.window.completed(&f.requests[5], IBV_WC_SUCCESS, record); // before the reads' responses
  BOOST_TEST(done == (std::vector<int>{0, 3, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 2u);
  done.clear();
  f.window.completed(&f.requests[2], IBV_WC_SUCCESS, record); // out of order as well
  f.window.completed(&f.requests[1], IBV_WC_SUCCESS, record);
  BOOST_TEST(done == (std::vector<int>{2, 1}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 0u);

  // SoftiWARP sends an unsignalled payload of more than a page from the user's pages when
  // TCP transmits: such a request asks for its own completion (the device then copies it),
  // unless the user let siw send from its memory (connection_options::siw_zero_copy).
  for (const bool signal_large : {true, false}) {
    fixture<4> w(8);
    w.window.set_iwarp(true);
    w.window.set_signal_large_payloads(signal_large);
    w.queue_all();
    std::array<ibv_sge, 4> sges{};
    const std::array<std::uint32_t, 4> lengths{65536, 4096, 8192, 100};
    auto chain = w.window.take([&](request* r) {
      r->wr = {};
      r->wr.wr_id = static_cast<std::uint64_t>(r->id);
      r->wr.opcode = IBV_WR_RDMA_WRITE;
      sges[r->id].length = lengths[r->id];
      r->wr.sg_list = &sges[r->id];
      r->wr.num_sge = 1;
      if (r->id == 2)
        r->wr.send_flags = IBV_SEND_INLINE; // copied at post time: no need
    });
    BOOST_TEST(signalled(chain.first) ==
                   (signal_large ? std::vector<int>{0, 3} : std::vector<int>{3}),
               boost::test_tools::per_element());
    w.window.completed(&w.requests[3], IBV_WC_SUCCESS, record); // in order, as before
    BOOST_TEST(w.window.outstanding() == 0u);
  }

  // In order (InfiniBand, RoCE): a read is signalled one in sixteen like any request, and
  // a later completion completes it.
  fixture<3> g(8);
  g.queue_all();
  auto d = g.window.take([&](request* r) {
    r->wr = {};
    r->wr.wr_id = static_cast<std::uint64_t>(r->id);
    r->wr.opcode = r->id == 0 ? IBV_WR_RDMA_READ : IBV_WR_SEND;
  });
  BOOST_TEST(signalled(d.first) == std::vector<int>{2}, boost::test_tools::per_element());
  g.window.completed(&g.requests[2], IBV_WC_SUCCESS, record);
  BOOST_TEST(g.window.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(room_freed_by_completions_lets_queued_requests_go) {
  fixture<5> f(2);
  f.queue_all();
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{0, 1}), boost::test_tools::per_element());
  f.window.completed(&f.requests[1], IBV_WC_SUCCESS, [](request*, ibv_wc_status) {});
  BOOST_TEST(f.window.outstanding() == 0u);
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{2, 3}), boost::test_tools::per_element());
  f.window.completed(&f.requests[2], IBV_WC_SUCCESS, [](request*, ibv_wc_status) {});
  BOOST_TEST(ids(f.take().first) == std::vector<int>{4}, boost::test_tools::per_element());
  BOOST_TEST(!f.window.has_queued());
}

BOOST_AUTO_TEST_CASE(requests_a_handler_starts_are_not_completed_by_the_same_completion) {
  // A handler run from a completion may initiate and post more work; the
  // completion that is being delivered must not complete that work too.
  fixture<6> f(8);
  for (int i = 0; i < 3; ++i)
    f.window.queue(&f.requests[i]);
  f.take(); // 0, 1, 2; 2 signalled
  std::vector<int> done;
  f.window.completed(&f.requests[2], IBV_WC_SUCCESS, [&](request* r, ibv_wc_status) {
    done.push_back(r->id);
    if (r->id == 0) {
      for (int i = 3; i < 6; ++i)
        f.window.queue(&f.requests[i]);
      f.take();
    }
  });
  BOOST_TEST(done == (std::vector<int>{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 3u);
}

BOOST_AUTO_TEST_CASE(a_refused_tail_leaves_the_window_oldest_first) {
  fixture<6> f(8);
  f.queue_all();
  auto c = f.take();
  // The device refused the chain from request 4 on.
  const ibv_send_wr* bad = &f.requests[4].wr;
  std::vector<int> refused;
  f.window.unposted(bad, [&](request* r) { refused.push_back(r->id); });
  BOOST_TEST(refused == (std::vector<int>{4, 5}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 4u);
  BOOST_TEST(c.requests == 6u);
  // The posted ones still complete in order.
  std::vector<int> done;
  f.window.completed(&f.requests[3], IBV_WC_SUCCESS,
                     [&](request* r, ibv_wc_status) { done.push_back(r->id); });
  BOOST_TEST(done == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 0u);
}

BOOST_AUTO_TEST_CASE(a_queued_request_is_withdrawn_and_the_queue_walked_in_order) {
  fixture<4> f(2);
  f.queue_all();
  f.take(); // 0 and 1 posted, 2 and 3 queued
  BOOST_TEST(f.window.queued_after(&f.requests[2]) == &f.requests[3]);
  BOOST_TEST(f.window.queued_after(&f.requests[3]) == nullptr);
  f.window.withdraw(&f.requests[3]);
  BOOST_TEST(f.window.queued_after(&f.requests[2]) == nullptr);
  f.window.completed(&f.requests[1], IBV_WC_SUCCESS, [](request*, ibv_wc_status) {});
  BOOST_TEST(ids(f.take().first) == std::vector<int>{2}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(close_takes_back_queued_then_posted_requests) {
  fixture<5> f(3);
  f.queue_all();
  f.take();
  std::vector<int> queued, posted;
  while (request* r = f.window.pop_queued())
    queued.push_back(r->id);
  while (request* r = f.window.pop_posted())
    posted.push_back(r->id);
  BOOST_TEST(queued == (std::vector<int>{3, 4}), boost::test_tools::per_element());
  BOOST_TEST(posted == (std::vector<int>{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(f.window.outstanding() == 0u);
  BOOST_TEST(!f.window.has_queued());
}


BOOST_AUTO_TEST_SUITE(credits)

BOOST_AUTO_TEST_CASE(messages_stop_at_the_peers_receives_and_what_follows_waits_in_order) {
  fixture<6> f(64);
  f.window.limit_by_credits(3);
  f.requests[1].message = false; // a write: takes no receive at the peer
  f.queue_all();
  auto c = f.take();
  // 0, (write 1), 2, 3 use the three receives; 4 waits, and 5 behind it.
  BOOST_TEST(ids(c.first) == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(f.window.waits_for_credits());
  BOOST_TEST(!f.take().first);
  // The peer reports two more receives posted: 4 and 5 go.
  f.window.peer_posted(5);
  BOOST_TEST(!f.window.waits_for_credits());
  auto more = f.take();
  BOOST_TEST(ids(more.first) == (std::vector<int>{4, 5}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_older_report_read_late_changes_nothing) {
  fixture<6> f(64);
  f.window.limit_by_credits(2);
  f.queue_all();
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{0, 1}), boost::test_tools::per_element());
  f.window.peer_posted(4);
  f.window.peer_posted(3); // an older report: ignored
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(f.window.waits_for_credits());
}

BOOST_AUTO_TEST_CASE(a_request_queued_first_overtakes_messages_held_back) {
  fixture<3> f(64);
  f.window.limit_by_credits(0);
  f.window.queue(&f.requests[0]);
  f.window.queue(&f.requests[1]);
  f.requests[2].message = false; // keepalive's probe
  f.window.queue_first(&f.requests[2]);
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{2}), boost::test_tools::per_element());
  BOOST_TEST(f.window.waits_for_credits());
}

BOOST_AUTO_TEST_CASE(messages_the_device_refused_give_their_credits_back) {
  fixture<4> f(64);
  f.window.limit_by_credits(4);
  f.queue_all();
  auto c = f.take();
  // The device took 0 and 1 only: 2 and 3 never reached the peer.
  f.window.unposted(c.first->next->next, [](request*) {});
  f.window.queue(&f.requests[2]);
  f.window.queue(&f.requests[3]);
  BOOST_TEST(ids(f.take().first) == (std::vector<int>{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(without_credits_nothing_is_held_back) {
  fixture<8> f(64);
  f.queue_all();
  BOOST_TEST(f.take().requests == 8u);
  BOOST_TEST(!f.window.waits_for_credits());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE_END()
