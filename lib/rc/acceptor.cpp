// asio_rdma::acceptor: a listening rdma_cm id and the queue of its requests.
#include "cm/cm_channel.hpp"
#include "cm/endpoint.hpp"
#include "internal_access.hpp"
#include "rc/pending_request.hpp"
#include "trace.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/acceptor.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstring>
#include <deque>
#include <variant>

namespace asio_rdma::detail {

class acceptor_impl final : public cm_event_target,
                            public std::enable_shared_from_this<acceptor_impl> {
public:
  explicit acceptor_impl(const asio::any_io_executor& ex) : ex_(ex) {}
  ~acceptor_impl() { close(); }

  void listen(const std::string& address, std::uint16_t port, const acceptor_options& options,
              error_code& ec) {
    if (listen_id_) {
      ec = asio::error::already_open;
      return;
    }
    if (options.backlog <= 0 ||
        options.connection.validate(connection_options::max_accept_private_data)) {
      ec = errc::invalid_option;
      return;
    }
    auto ip = asio::ip::make_address(address, ec);
    if (ec)
      return;
    options_ = options;
    channel_ = cm_channel::create(ex_, ec);
    if (ec)
      return;
    auto id = channel_->create_id(this, RDMA_PS_TCP, ec);
    if (ec)
      return;
    asio::ip::tcp::endpoint ep(ip, port);
    sockaddr_storage addr{};
    std::memcpy(&addr, ep.data(), ep.size());
    if ((ec = from_minus_one(::rdma_bind_addr(id.get(), reinterpret_cast<sockaddr*>(&addr)))))
      return;
    if ((ec = from_minus_one(::rdma_listen(id.get(), options.backlog))))
      return;
    listen_id_ = std::move(id);
  }

  bool is_open() const { return listen_id_ != nullptr; }

  asio::ip::tcp::endpoint local_endpoint() const {
    if (!listen_id_)
      return {};
    auto ep = to_endpoint(::rdma_get_local_addr(listen_id_.get()));
    ep.port(ntohs(::rdma_get_src_port(listen_id_.get())));
    return ep;
  }

  /// Waits for a request for `pending`: an async_accept_request's or an async_accept's.
  template <typename Signature> void wait(pending_operation<Signature>&& pending) {
    waiter w{std::move(pending), 0};
    if (!listen_id_)
      return finish(w, asio::error::bad_descriptor, nullptr, from::user_call);
    w.key = ++next_waiter_;
    std::visit(
        [&](auto& op) {
          op.on_cancel([this, key = w.key](asio::cancellation_type) { cancel(key); });
        },
        w.handler);
    // The channel is waited on only while someone waits for a request: an idle
    // acceptor leaves no work in the io_context (requests queue in the kernel).
    if (waiters_.empty())
      channel_->add_interest();
    waiters_.push_back(std::move(w));
    if (!requests_.empty())
      asio::post(ex_, [self = shared_from_this()] { self->match(); });
  }

  void close() noexcept {
    listen_id_.reset();
    requests_.clear(); // rejects them
    while (!waiters_.empty()) {
      waiter w = take(waiters_.begin());
      finish(w, asio::error::operation_aborted, nullptr, from::user_call);
    }
  }

  void on_cm_event(const cm_event& event) override {
    if (event.type != RDMA_CM_EVENT_CONNECT_REQUEST)
      return; // errors of the listening id itself leave it listening
    auto request = pending_request_ptr(new pending_request);
    request->ex = ex_;
    request->channel = channel_;
    request->id.reset(event.id);
    request->event = event;
    // Until decided, the new id's events (e.g. the requester giving up) are dropped.
    event.id->context = nullptr;
    if (!listen_id_ || requests_.size() >= static_cast<std::size_t>(options_.backlog))
      return; // request's destructor rejects it
    requests_.push_back(std::move(request));
    match();
  }

private:
  struct waiter {
    std::variant<pending_operation<void(error_code, connection_request)>,
                 pending_operation<void(error_code, connection)>>
        handler;
    std::uint64_t key;
  };

  void match() {
    while (!waiters_.empty() && !requests_.empty()) {
      auto request = std::move(requests_.front());
      requests_.pop_front();
      if (requester_gave_up(*request)) {
        ASIO_RDMA_TRACE("acceptor: dropped a request whose requester gave up");
        continue; // as Linux drops a TCP connection reset before accept() takes it
      }
      waiter w = take(waiters_.begin());
      finish(w, {}, std::move(request), from::completion_path);
    }
  }

  /// True if the request's requester has given up (its connect timed out or was
  /// cancelled): its connection manager state is idle again, so rdma_cm can no longer say
  /// how to bring a queue pair up for it. Asked here because the kernel drops the events
  /// of a request's id until the request has been read (RoCE's reject among them), and
  /// the acceptor reads requests only while an operation waits for one. A requester that
  /// gives up after this check is caught at the accept itself (connection_establish.cpp,
  /// requester_gone: connection_aborted).
  static bool requester_gave_up(const pending_request& request) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    int mask = 0;
    return ::rdma_init_qp_attr(request.id.get(), &attr, &mask) != 0 && errno == EINVAL;
  }

  waiter take(std::deque<waiter>::iterator it) {
    waiter w = std::move(*it);
    waiters_.erase(it);
    if (waiters_.empty())
      channel_->remove_interest();
    return w;
  }

  void cancel(std::uint64_t key) {
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->key != key)
        continue;
      waiter w = take(it);
      return finish(w, asio::error::operation_aborted, nullptr, from::user_call);
    }
  }

  void finish(waiter& w, error_code ec, pending_request_ptr request, from origin) {
    if (auto* as_connection = std::get_if<1>(&w.handler)) {
      if (ec)
        return as_connection->complete(ex_, origin, ec, connection());
      // The request becomes a connection: the operation waits on for its establishment,
      // which installs its own cancellation handler.
      as_connection->ignore_cancel();
      return start_accept_request_as_connection(std::move(request), options_.connection,
                                                std::move(*as_connection));
    }
    auto result =
        ec ? connection_request() : internal_access::make_request(std::move(request), ex_);
    std::get<0>(w.handler).complete(ex_, origin, ec, std::move(result));
  }

  asio::any_io_executor ex_;
  acceptor_options options_;
  std::shared_ptr<cm_channel> channel_;
  cm_id_ptr listen_id_;
  std::deque<pending_request_ptr> requests_;
  std::deque<waiter> waiters_;
  std::uint64_t next_waiter_ = 0;
};

void start_accept_request(acceptor_impl* impl, request_operation&& pending) {
  impl->wait(std::move(pending));
}

void start_accept(acceptor_impl* impl, connection_operation&& pending) {
  impl->wait(std::move(pending));
}

} // namespace asio_rdma::detail

namespace asio_rdma {

acceptor::acceptor(const executor_type& ex)
    : ex_(ex), impl_(std::make_shared<detail::acceptor_impl>(ex)) {}

acceptor::acceptor(const executor_type& ex, const std::string& address, std::uint16_t port,
                   const acceptor_options& options)
    : acceptor(ex) {
  listen(address, port, options);
}

acceptor::acceptor(acceptor&&) noexcept = default;
acceptor& acceptor::operator=(acceptor&& other) noexcept {
  if (this != &other) {
    close();
    ex_ = std::move(other.ex_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}
acceptor::~acceptor() {
  close();
}

void acceptor::listen(const std::string& address, std::uint16_t port,
                      const acceptor_options& options) {
  error_code ec;
  listen(address, port, options, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::acceptor::listen");
}

void acceptor::listen(const std::string& address, std::uint16_t port,
                      const acceptor_options& options, error_code& ec) {
  if (!impl_) { // moved from
    ec = boost::asio::error::bad_descriptor;
    return;
  }
  impl_->listen(address, port, options, ec);
}

bool acceptor::is_open() const noexcept {
  return impl_ && impl_->is_open();
}

boost::asio::ip::tcp::endpoint acceptor::local_endpoint() const {
  return impl_ ? impl_->local_endpoint() : boost::asio::ip::tcp::endpoint();
}

void acceptor::close() noexcept {
  if (impl_)
    impl_->close();
}

} // namespace asio_rdma
