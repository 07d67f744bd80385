#include "asio_floor.hpp"

#include "measurement.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace rdma_bench::raw {

namespace {

namespace asio = boost::asio;

/// One end's two steps as Asio asynchronous operations over raw verbs, and the task that
/// polls for them. The handlers are use_awaitable's own type, kept in place: no
/// type erasure and no allocation per step.
class awaited_steps {
public:
  using handler = asio::async_result<asio::use_awaitable_t<>, void()>::handler_type;

  awaited_steps(asio::io_context& io, endpoint& ep, std::uint32_t size)
      : io_(io), ep_(ep), size_(size), events_(io) {
    sge_ = {reinterpret_cast<std::uint64_t>(ep.buffer), size, ep.mr->lkey};
    wr_.sg_list = &sge_;
    wr_.num_sge = 1;
    wr_.opcode = IBV_WR_SEND;
    inline_ = size <= ep.inline_limit ? IBV_SEND_INLINE : 0;
  }
  ~awaited_steps() {
    if (events_.is_open())
      events_.release(); // the endpoint's completion channel closes it
    if (cm_ && cm_->is_open())
      cm_->release(); // and the CM event channel its own
  }

  /// Posts the message (inline where it fits: its bytes are then in the work request) and
  /// completes when the poll turn that started it ends: never inside this call.
  asio::awaitable<void> send() {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](handler h) {
          // One request in 16 asks for a completion, which frees the send queue's slots.
          wr_.send_flags = inline_ | (++posted_ % 16 == 0 ? IBV_SEND_SIGNALED : 0);
          ibv_send_wr* bad = nullptr;
          if (int err = ::ibv_post_send(ep_.id->qp, &wr_, &bad))
            fail("ibv_post_send", err);
          sent_.emplace(std::move(h));
        },
        asio::use_awaitable);
  }

  /// Completes with the next message's arrival (from the poll that finds it).
  asio::awaitable<void> receive() {
    return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](handler h) { waiting_.emplace(std::move(h)); }, asio::use_awaitable);
  }

  /// Polls until stop(), busy or, when `ep` has a completion channel, after each of its
  /// events (waited for by the io_context's reactor). `client_left` (the server's) is
  /// asked every 4,096 empty busy polls; with events, `cm_fd` readable asks it.
  void start(std::function<bool()> client_left = {}, int cm_fd = -1) {
    client_left_ = std::move(client_left);
    if (!ep_.events)
      return asio::post(io_, [this] { spin(); });
    events_.assign(ep_.events->fd);
    wait_event();
    if (cm_fd >= 0) {
      cm_ = std::make_unique<asio::posix::stream_descriptor>(io_, cm_fd);
      wait_cm();
    }
  }
  /// Ends the polling, and with it a coroutine still waiting (its frame is destroyed).
  void stop() {
    stopped_ = true;
    waiting_.reset();
    sent_.reset();
    if (events_.is_open())
      events_.cancel();
    if (cm_ && cm_->is_open())
      cm_->cancel();
  }

private:
  void spin() {
    for (int turn = 0; turn < 256 && !stopped_; ++turn)
      if (!poll_once() && client_left_ && (++idle_ & 4095) == 0 && client_left_())
        return stop();
    if (!stopped_)
      asio::post(io_, [this] { spin(); });
  }

  // Event mode: the channel's event is taken, the CQ armed again, then polled until empty
  // (what arrived before the arming is in it).
  void wait_event() {
    events_.async_wait(asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& ec) {
                         if (ec || stopped_)
                           return;
                         ibv_cq* cq = nullptr;
                         void* context = nullptr;
                         if (::ibv_get_cq_event(ep_.events, &cq, &context) != 0)
                           fail("ibv_get_cq_event");
                         if (++ep_.unacked_events == 64) {
                           ::ibv_ack_cq_events(ep_.cq, ep_.unacked_events);
                           ep_.unacked_events = 0;
                         }
                         if (::ibv_req_notify_cq(ep_.cq, 0) != 0)
                           fail("ibv_req_notify_cq");
                         while (!stopped_ && poll_once()) {
                         }
                         if (!stopped_)
                           wait_event();
                       });
  }
  void wait_cm() {
    cm_->async_wait(asio::posix::stream_descriptor::wait_read,
                    [this](const boost::system::error_code& ec) {
                      if (ec || stopped_)
                        return;
                      if (client_left_())
                        return stop();
                      wait_cm();
                    });
  }

  /// One poll of up to 4 completions, then the handlers due: false if nothing came.
  bool poll_once() {
    ibv_wc wc[4];
    const int n = ::ibv_poll_cq(ep_.cq, 4, wc);
    if (n < 0)
      fail("ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status == IBV_WC_WR_FLUSH_ERR && client_left_) {
        stop(); // the server's client disconnected
        return false;
      }
      endpoint::check(wc[i]);
      if (wc[i].opcode == IBV_WC_RECV) {
        ep_.post_receives(0, 1, size_, 1);
        ++arrived_;
      }
    }
    if (waiting_ && arrived_ > 0) {
      --arrived_;
      take(waiting_)();
    }
    if (sent_)
      take(sent_)();
    return n > 0;
  }

  static handler take(std::optional<handler>& slot) {
    handler h = std::move(*slot);
    slot.reset();
    return h;
  }

  asio::io_context& io_;
  endpoint& ep_;
  std::uint32_t size_;
  ibv_sge sge_{};
  ibv_send_wr wr_{};
  unsigned inline_ = 0;
  std::uint64_t posted_ = 0;
  std::uint64_t arrived_ = 0;
  unsigned idle_ = 0;
  bool stopped_ = false;
  std::optional<handler> waiting_;
  std::optional<handler> sent_;
  std::function<bool()> client_left_;
  asio::posix::stream_descriptor events_;
  std::unique_ptr<asio::posix::stream_descriptor> cm_;
};

/// Runs `body` as a coroutine on `io` until it returns; rethrows what it threw.
void run(asio::io_context& io, asio::awaitable<void> body) {
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(body), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace

result awaited_latency(const settings& s, endpoint& ep, std::size_t size) {
  asio::io_context io(1);
  awaited_steps steps(io, ep, static_cast<std::uint32_t>(size));
  measurement m(s, size);
  steps.start();
  run(io, [&]() -> asio::awaitable<void> {
    m.begin();
    while (!m.done()) {
      const auto start = measurement::clock::now();
      co_await steps.send();
      co_await steps.receive();
      const auto now = measurement::clock::now();
      m.sample(std::chrono::duration<double, std::micro>(now - start).count() / 2);
      m.completed(1, now);
    }
    steps.stop();
  }());
  return m.take();
}

void awaited_echo(endpoint& ep, std::uint32_t size, const std::function<bool()>& client_left,
                  int cm_fd) {
  asio::io_context io(1);
  awaited_steps steps(io, ep, size);
  steps.start(client_left, cm_fd);
  // The coroutine waits in receive() when the client goes: stop() destroys it there.
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    for (;;) {
      co_await steps.receive();
      co_await steps.send();
    }
  }, [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  });
  io.run();
}

} // namespace rdma_bench::raw
