// Template bodies of asio_rdma::connection.
#pragma once

#include <asio_rdma/detail/pending_operation.hpp>

#include <boost/asio/associator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/system_executor.hpp>

#include <array>
#include <memory>

namespace asio_rdma {
namespace detail {

/// async_receive's handler as a receive completes inside lib/ (with the received_message):
/// called with the message's size. Its executor, allocator and cancellation slot are the
/// handler's own (the associator below).
template <typename Handler> struct size_of_message {
  Handler handler;
  void operator()(error_code ec, const received_message& message) && {
    std::move(handler)(ec, message.size);
  }
};

/// The handler of async_receive_lent as lib/ completes it: makes the lent_message, which
/// takes over the hold on the connection when a buffer is lent. Its executor, allocator
/// and cancellation slot are the handler's own (the associator below).
template <typename Handler> struct lend_adapter {
  Handler handler;
  std::shared_ptr<connection_impl> lender;
  void operator()(error_code ec, const received_message& message) && {
    std::move(handler)(ec, lent_message(message, std::move(lender)));
  }
};

// The initiation objects of connection's operations. Each completes with not_connected
// (posted) on a connection that is not open.

/// async_send and async_send_with_imm of a buffer sequence (copied into a send slot or
/// sent inline when posted).
class initiate_async_send : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers,
                  std::optional<std::uint32_t> immediate) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected, std::size_t(0));
    start_send(impl_, buffers.view(), immediate,
               pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// A posted operation on registered memory (zero-copy send, RDMA write/read, atomics)
/// described by a work_request. Signature is void(error_code, std::size_t) or the same
/// with std::uint64_t (one type on LP64).
class initiate_async_work : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler, std::size_t N>
  void operator()(Handler&& handler, const work_request& request,
                  const captured_list<local_buffer, N>& local) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected, std::size_t(0));
    start_work(impl_, with_local(request, local),
               pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// async_batch: the entries are read (copied into the library's operations) when the
/// operation starts.
class initiate_async_batch : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::span<const batch_entry> entries) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected, std::size_t(0));
    start_batch(impl_, entries,
                pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// async_receive and async_receive_message: one initiation, whose `Adapt` makes the
/// user's handler one that takes the received_message (as_size for async_receive, which
/// passes on the size; as_message for async_receive_message, the handler itself), so that
/// lib/ completes every receive with one signature.
template <typename Adapt> class initiate_receive : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers) const {
    if (!impl_)
      return closed(Adapt::wrap(std::forward<Handler>(handler)),
                    boost::asio::error::not_connected, received_message());
    start_receive(impl_, buffers.view(),
                  pending<void(error_code, received_message)>(
                      Adapt::wrap(std::forward<Handler>(handler))));
  }
};

/// async_receive's handler takes the size: wrapped in size_of_message.
struct as_size {
  template <typename Handler> static size_of_message<std::decay_t<Handler>> wrap(Handler&& h) {
    return {std::forward<Handler>(h)};
  }
};

/// async_receive_message's handler takes the received_message: passed on as it is (not
/// moved into a temporary: the receive path would pay for a move and a destruction).
struct as_message {
  template <typename Handler> static Handler&& wrap(Handler&& h) noexcept {
    return std::forward<Handler>(h);
  }
};

using initiate_async_receive = initiate_receive<as_size>;
using initiate_async_receive_message = initiate_receive<as_message>;

/// async_receive_lent: the handler gets a lent_message, which holds the connection while
/// it holds a buffer (so the initiation gets the connection's shared owner).
class initiate_async_receive_lent : public io_initiation<connection_impl*> {
public:
  initiate_async_receive_lent(const std::shared_ptr<connection_impl>& impl,
                              const boost::asio::any_io_executor& ex) noexcept
      : io_initiation(impl.get(), ex), lender_(&impl) {}
  template <typename Handler> void operator()(Handler&& handler) const {
    using adapted = lend_adapter<std::decay_t<Handler>>;
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected, lent_message());
    start_receive_lent(impl_, pending<void(error_code, received_message)>(
                                  adapted{std::forward<Handler>(handler), *lender_}));
  }

private:
  const std::shared_ptr<connection_impl>* lender_; // the connection's, which outlives this
};

/// async_send_remote_buffer: the encoding travels by value into the operation (the
/// caller's array would be gone before a deferred operation starts).
class initiate_async_send_remote_buffer : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler,
                  std::array<std::byte, remote_buffer::encoded_size> bytes) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected, std::size_t(0));
    // Short enough to go inline or be copied at post time: safe to point at.
    const single_buffer<boost::asio::const_buffer> b{boost::asio::buffer(bytes)};
    start_send(impl_, b.view(), std::nullopt,
               pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// async_disconnect.
class initiate_async_disconnect : public io_initiation<connection_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::not_connected);
    start_disconnect(impl_, pending<void(error_code)>(std::forward<Handler>(handler)));
  }
};

inline work_request make_request(work_request::kind op, const remote_buffer& remote = {}) {
  work_request r;
  r.op = op;
  r.remote = remote;
  return r;
}

/// One local buffer, or a list of up to work_request::max_local.
inline captured_list<local_buffer, 1> capture_local(const local_buffer& b) {
  captured_list<local_buffer, 1> captured;
  captured.push_back(b);
  return captured;
}
inline captured_list<local_buffer, work_request::max_local>
capture_local(std::span<const local_buffer> list) {
  captured_list<local_buffer, work_request::max_local> captured;
  for (const auto& b : list)
    captured.push_back(b);
  return captured;
}

/// async_receive_remote_buffer, composed of the public async_receive and a
/// steady_timer: the receive goes into a buffer of its own, bound to a
/// cancellation signal that the timer and the caller's cancellation emit.
class receive_remote_buffer_op {
public:
  /// `ex`: the connection's executor, empty for a connection that is not open
  /// (its async_receive fails with not_connected; no timer is needed).
  receive_remote_buffer_op(connection& conn, const boost::asio::any_io_executor& ex,
                           std::chrono::milliseconds timeout)
      : conn_(&conn), ex_(ex), timeout_(timeout) {}

  template <typename Self> void operator()(Self& self) {
    state_ = std::make_shared<state>();
    if (!ex_)
      return conn_->async_receive(boost::asio::buffer(state_->bytes), std::move(self));
    // Every cancellation type stops the wait (as documented).
    self.reset_cancellation_state(boost::asio::enable_total_cancellation());
    std::weak_ptr<state> weak = state_;
    auto& timer = state_->timer.emplace(ex_);
    timer.expires_after(timeout_);
    timer.async_wait([weak](const error_code& ec) {
      if (auto s = weak.lock(); s && !ec) {
        s->timed_out = true;
        s->cancel.emit(boost::asio::cancellation_type::terminal);
      }
    });
    auto caller = self.get_cancellation_state().slot();
    if (caller.is_connected())
      caller.assign([weak](boost::asio::cancellation_type type) {
        if (auto s = weak.lock())
          s->cancel.emit(type);
      });
    auto& s = *state_;
    conn_->async_receive(boost::asio::buffer(s.bytes),
                         boost::asio::bind_cancellation_slot(s.cancel.slot(), std::move(self)));
  }

  template <typename Self> void operator()(Self& self, error_code ec, std::size_t length) {
    auto s = std::move(state_);
    if (s->timer)
      s->timer->cancel();
    remote_buffer result;
    if (!ec)
      result = remote_buffer::decode(std::span<const std::byte>(s->bytes.data(), length), ec);
    else if (ec == boost::asio::error::operation_aborted && s->timed_out)
      ec = boost::asio::error::timed_out;
    else if (ec == errc::buffer_too_small)
      ec = errc::protocol_error; // far longer than an advertisement
    self.complete(ec, result);
  }

private:
  struct state {
    std::optional<boost::asio::steady_timer> timer;
    boost::asio::cancellation_signal cancel; // cancels the receive
    std::array<std::byte, 64> bytes{};       // an advertisement is 24 bytes
    bool timed_out = false;
  };
  connection* conn_; // used only while initiating: the caller may move the connection later
  boost::asio::any_io_executor ex_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<state> state_;
};

} // namespace detail

template <typename ConstBufferSequence, typename CompletionToken>
  requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value
auto connection::async_send(const ConstBufferSequence& buffers, CompletionToken&& token) {
  return async_send_with_imm_impl(buffers, std::nullopt, std::forward<CompletionToken>(token));
}

template <typename ConstBufferSequence, typename CompletionToken>
  requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value
auto connection::async_send_with_imm(const ConstBufferSequence& buffers, std::uint32_t immediate,
                                     CompletionToken&& token) {
  return async_send_with_imm_impl(buffers, immediate, std::forward<CompletionToken>(token));
}

template <typename ConstBufferSequence, typename CompletionToken>
auto connection::async_send_with_imm_impl(const ConstBufferSequence& buffers,
                                          std::optional<std::uint32_t> immediate,
                                          CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_send(impl_.get(), ex_), token,
      detail::capture_buffers<boost::asio::const_buffer>(buffers), immediate);
}

template <typename CompletionToken>
auto connection::async_send(const local_buffer& buffer, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::send),
      detail::capture_local(buffer));
}

template <typename CompletionToken>
auto connection::async_send(std::span<const local_buffer> buffers, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::send),
      detail::capture_local(buffers));
}

template <typename CompletionToken>
auto connection::async_write(const local_buffer& local, const remote_buffer& remote,
                             CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::write, remote),
      detail::capture_local(local));
}

template <typename CompletionToken>
auto connection::async_write(std::span<const local_buffer> local, const remote_buffer& remote,
                             CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::write, remote),
      detail::capture_local(local));
}

template <typename CompletionToken>
auto connection::async_write_with_imm(const local_buffer& local, const remote_buffer& remote,
                                      std::uint32_t immediate, CompletionToken&& token) {
  auto request = detail::make_request(detail::work_request::kind::write, remote);
  request.immediate = immediate;
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token, request, detail::capture_local(local));
}

template <typename CompletionToken>
auto connection::async_read(const local_buffer& local, const remote_buffer& remote,
                            CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::read, remote),
      detail::capture_local(local));
}

template <typename CompletionToken>
auto connection::async_read(std::span<const local_buffer> local, const remote_buffer& remote,
                            CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token,
      detail::make_request(detail::work_request::kind::read, remote),
      detail::capture_local(local));
}

template <typename CompletionToken>
auto connection::async_fetch_add(const remote_buffer& remote, std::uint64_t value,
                                 CompletionToken&& token) {
  detail::work_request request;
  request.op = detail::work_request::kind::fetch_add;
  request.remote = remote;
  request.compare_add = value;
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::uint64_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token, request,
      detail::captured_list<local_buffer, 0>{});
}

template <typename CompletionToken>
auto connection::async_compare_swap(const remote_buffer& remote, std::uint64_t expected,
                                    std::uint64_t desired, CompletionToken&& token) {
  detail::work_request request;
  request.op = detail::work_request::kind::compare_swap;
  request.remote = remote;
  request.compare_add = expected;
  request.swap = desired;
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::uint64_t)>(
      detail::initiate_async_work(impl_.get(), ex_), token, request,
      detail::captured_list<local_buffer, 0>{});
}

template <typename CompletionToken>
auto connection::async_batch(std::span<const batch_entry> entries, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_batch(impl_.get(), ex_), token, entries);
}

template <typename MutableBufferSequence, typename CompletionToken>
auto connection::async_receive(const MutableBufferSequence& buffers, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_receive(impl_.get(), ex_), token,
      detail::capture_buffers<boost::asio::mutable_buffer>(buffers));
}

template <typename MutableBufferSequence, typename CompletionToken>
auto connection::async_receive_message(const MutableBufferSequence& buffers,
                                       CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, received_message)>(
      detail::initiate_async_receive_message(impl_.get(), ex_), token,
      detail::capture_buffers<boost::asio::mutable_buffer>(buffers));
}

template <typename CompletionToken> auto connection::async_receive_lent(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, lent_message)>(
      detail::initiate_async_receive_lent(impl_, ex_), token);
}

template <typename CompletionToken>
auto connection::async_send_remote_buffer(const remote_buffer& remote, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_send_remote_buffer(impl_.get(), ex_), token, remote.encode());
}

template <typename CompletionToken>
auto connection::async_receive_remote_buffer(std::chrono::milliseconds timeout,
                                             CompletionToken&& token) {
  return boost::asio::async_compose<CompletionToken, void(error_code, remote_buffer)>(
      detail::receive_remote_buffer_op(*this, ex_, timeout), token,
      ex_ ? ex_ : executor_type(boost::asio::system_executor()));
}

template <typename CompletionToken> auto connection::async_disconnect(CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code)>(
      detail::initiate_async_disconnect(impl_.get(), ex_), token);
}

} // namespace asio_rdma

/// \cond INTERNAL
namespace asio_rdma::detail {
/// The receive handlers' adapters, whose executor, allocator and cancellation slot are
/// those of the user's handler they hold (`handler`).
template <template <typename> class Adapter> inline constexpr bool forwards_associations = false;
template <> inline constexpr bool forwards_associations<size_of_message> = true;
template <> inline constexpr bool forwards_associations<lend_adapter> = true;

/// They move as the user's handler does (the lender is a shared_ptr): kept in place by a
/// pending_operation whenever that handler would be.
template <typename Handler>
struct moves_without_throwing<size_of_message<Handler>> : moves_without_throwing<Handler> {};
template <typename Handler>
struct moves_without_throwing<lend_adapter<Handler>> : moves_without_throwing<Handler> {};
} // namespace asio_rdma::detail

template <template <typename, typename> class Associator, template <typename> class Adapter,
          typename Handler, typename Default>
  requires asio_rdma::detail::forwards_associations<Adapter>
struct boost::asio::associator<Associator, Adapter<Handler>, Default>
    : Associator<Handler, Default> {
  static typename Associator<Handler, Default>::type get(const Adapter<Handler>& h) noexcept {
    return Associator<Handler, Default>::get(h.handler);
  }
  static auto get(const Adapter<Handler>& h, const Default& d) noexcept
      -> decltype(Associator<Handler, Default>::get(h.handler, d)) {
    return Associator<Handler, Default>::get(h.handler, d);
  }
};
/// \endcond
