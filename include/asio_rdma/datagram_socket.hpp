// asio-rdma: unreliable datagrams (a UD queue pair) as Asio operations.
//
//   asio_rdma::datagram_socket server(ex, "192.0.2.1", 7500);
//   asio_rdma::datagram_socket client(ex, "192.0.2.1", 0);
//   auto peer = co_await client.async_resolve("192.0.2.1", 7500);
//   co_await client.async_send_to(asio::buffer("ping", 4), peer);
//   auto [n, sender] = co_await server.async_receive_from(asio::buffer(buf));
//   co_await server.async_send_to(asio::buffer(buf, n), sender);  // reply
//
// Datagram semantics: a datagram arrives whole or not at all. Delivery is not
// guaranteed (a receiver without a free buffer, a lost packet or a peer that
// is gone all drop it silently: a send completes once the device has sent it,
// not when it arrived), order is not guaranteed, and no connection exists. A
// datagram is at most max_message_size() bytes: the port's active MTU.
//
// Threading: like an Asio socket, a datagram_socket is not thread-safe; use it
// from the threads running its executor, one at a time. Endpoints may be
// copied and used from any thread. The library starts no thread of its own.
#pragma once

#include <asio_rdma/completion_mode.hpp>
#include <asio_rdma/detail/buffer_array.hpp>
#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/detail/handlers.hpp>
#include <asio_rdma/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/address.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct ibv_qp;
struct rdma_cm_id;

namespace asio_rdma {

namespace detail {
class datagram_impl;
struct address_handle;
} // namespace detail

/// Where a datagram goes to or came from: a peer's UD queue pair.
///
/// Made by datagram_socket::async_resolve (through rdma_cm; the address
/// handle is created once and shared by every copy), or reported as the
/// sender of a received datagram (its address handle is then created on the
/// first reply and cached by the socket per peer GID).
struct datagram_endpoint {
  /// The peer's IP address (for a received datagram: from its GID).
  boost::asio::ip::address address;
  /// The peer's queue pair number and queue key.
  std::uint32_t qp_num = 0;
  std::uint32_t qkey = 0; ///< The queue key its datagrams must carry.
  /// The peer's GID (IPv4 addresses as \::ffff:a.b.c.d).
  std::array<std::uint8_t, 16> gid{};
  /// The address handle (opaque; null for a received sender until a reply).
  std::shared_ptr<detail::address_handle> handle;

  /// Same queue pair on the same GID.
  friend bool operator==(const datagram_endpoint& a, const datagram_endpoint& b) noexcept {
    return a.qp_num == b.qp_num && a.gid == b.gid;
  }
};

/// Sizes of a datagram_socket. Out-of-range values fail the constructor with
/// errc::invalid_option.
struct datagram_options {
  /// Receive buffers kept posted by the library (1..65536). Datagrams that
  /// arrive while all are full and not yet taken by async_receive_from are
  /// dropped by the device.
  std::uint32_t receive_depth = 256;
  /// Datagrams in flight on the send queue (1..65536); more sends wait in
  /// order, they do not fail.
  std::uint32_t send_depth = 64;
  /// Bounds each async_resolve (address, route and rdma_cm's SIDR exchange).
  std::uint32_t resolve_timeout_ms = 4000;
  /// How completions are noticed (see completion_mode; as for connections).
  asio_rdma::completion_mode completion_mode = asio_rdma::completion_mode::event;
  /// With completion_mode::adaptive: how long to keep polling after the last
  /// completion before waiting for events again.
  std::chrono::microseconds adaptive_spin = std::chrono::microseconds(200);
};

/// One UD queue pair bound to a local address and rdma_cm UDP port. Peers
/// find it with async_resolve(address, port); it answers their rdma_cm
/// requests by itself. Move-only. Closing or destroying it aborts its pending
/// operations (operation_aborted) and releases the queue pair.
class datagram_socket {
public:
  /// The executor handlers run on by default.
  using executor_type = boost::asio::any_io_executor;

  /// Binds to `address` (numeric IPv4/IPv6 of an RDMA device's interface)
  /// and `port` (0: an ephemeral one), creates the queue pair and posts the
  /// receive buffers. Throws boost::system::system_error (errc::no_device if
  /// no RDMA device has that address, errc::operation_not_supported if an
  /// iWARP device has it: iWARP has no datagrams; address_in_use,
  /// invalid_option).
  datagram_socket(const executor_type& ex, std::string_view address, std::uint16_t port,
                  const datagram_options& options = datagram_options());
  /// As above; reports failure through `ec` (the socket is then closed).
  datagram_socket(const executor_type& ex, std::string_view address, std::uint16_t port,
                  const datagram_options& options, error_code& ec);
  /// Moves the socket; `other` is closed afterwards.
  datagram_socket(datagram_socket&& other) noexcept;
  /// Closes this socket, then takes `other`'s.
  datagram_socket& operator=(datagram_socket&& other) noexcept;
  ~datagram_socket();

  /// The executor given at construction.
  executor_type get_executor() const { return ex_; }
  /// Whether the socket is bound and not closed.
  bool is_open() const noexcept { return impl_ != nullptr; }
  /// The bound rdma_cm port (the ephemeral one chosen for port 0).
  std::uint16_t local_port() const;
  /// This socket's own endpoint as peers see it (address, QP number, qkey).
  datagram_endpoint local_endpoint() const;
  /// The largest datagram: the port's active MTU (e.g. 4096 on SoftRoCE at
  /// MTU 9000, 1024 at Ethernet MTU 1500). Larger sends fail with
  /// errc::message_too_large.
  std::size_t max_message_size() const;

  /// Finds the datagram socket listening at `host`:`port` through rdma_cm
  /// (RDMA_PS_UDP, a SIDR request) and creates its address handle. Resolve a
  /// peer once and reuse the endpoint: the handle is shared by its copies.
  /// Completion signature: void(error_code, datagram_endpoint). Errors:
  /// errc::address_resolution_failed, errc::route_resolution_failed,
  /// errc::unreachable (nobody at that port), asio::error::timed_out,
  /// asio::error::invalid_argument (not a numeric address). Bounded by
  /// datagram_options::resolve_timeout_ms. Cancellation (any type, through
  /// the token's cancellation slot) completes it with
  /// asio::error::operation_aborted at once and leaves the socket usable;
  /// close() aborts it too. The handler runs on its associated executor, never
  /// inside this call.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_resolve(std::string host, std::uint16_t port, CompletionToken&& token = {});

  /// Sends one datagram made of `buffers` (copied into the library's
  /// registered memory: the buffers may be reused as soon as this returns).
  /// Completion signature: void(error_code, std::size_t bytes), once the
  /// device has sent it (which says nothing about its arrival). Fails with
  /// errc::message_too_large beyond max_message_size() (nothing is sent),
  /// asio::error::bad_descriptor when the socket is closed. Not cancellable
  /// (a send completes at once); close() aborts sends still queued.
  template <typename ConstBufferSequence, typename CompletionToken = boost::asio::deferred_t>
  requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value auto
  async_send_to(const ConstBufferSequence& buffers, const datagram_endpoint& peer,
                CompletionToken&& token = {});

  /// Waits for the next datagram and copies it into `buffers`, which must
  /// stay valid until completion. Completion signature:
  /// void(error_code, std::size_t bytes, datagram_endpoint sender). A
  /// datagram larger than the buffers fails the receive with
  /// errc::buffer_too_small and stays queued (retry with a larger buffer).
  /// Cancellation (any type) completes it with operation_aborted; so does
  /// close(). The handler runs on its associated executor (default: the
  /// socket's).
  template <typename MutableBufferSequence, typename CompletionToken = boost::asio::deferred_t>
  requires boost::asio::is_mutable_buffer_sequence<MutableBufferSequence>::value auto
  async_receive_from(const MutableBufferSequence& buffers, CompletionToken&& token = {});

  /// Joins the multicast group `group` (a numeric IPv4 or IPv6 multicast
  /// address, e.g. "239.1.2.3") through rdma_cm, as rdma-core's mckey does,
  /// and attaches this socket's queue pair to it: datagrams sent to the group
  /// then arrive through async_receive_from like any other. Completion
  /// signature: void(error_code, datagram_endpoint group): send to `group`
  /// with async_send_to to reach every member (whether this socket receives
  /// its own sends to the group depends on the device). Errors:
  /// asio::error::invalid_argument (not a multicast address),
  /// asio::error::already_connected (already joined), the device's refusal.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_join(std::string group, CompletionToken&& token = {});

  /// Leaves `group`: the queue pair is detached and no longer receives its
  /// datagrams (ones already received stay queued). Groups still joined are
  /// left by close() and the destructor. Throws boost::system::system_error
  /// (asio::error::not_found if the group was not joined).
  void leave(std::string_view group);
  /// As above; reports failure through `ec`.
  void leave(std::string_view group, error_code& ec);

  /// Aborts pending operations (their handlers get operation_aborted, never
  /// from inside close()), releases the queue pair, the buffers and the
  /// rdma_cm id. Never waits: a send the device has already finished
  /// completes with its result, one still posted with operation_aborted
  /// (destroying the queue pair ends the device's use of its buffer).
  /// Idempotent; may be called from any of the socket's handlers.
  void close() noexcept;

  /// The underlying queue pair and rdma_cm id, for what the library does not
  /// wrap. Do not post to the queue pair or destroy either.
  ibv_qp* native_queue_pair() const;
  /// The rdma_cm id the socket is bound with (see native_queue_pair()).
  rdma_cm_id* native_handle() const;
  /// The former name of native_handle().
  [[deprecated("use native_handle()")]] rdma_cm_id* native_cm_id() const { return native_handle(); }

private:
  executor_type ex_;
  std::shared_ptr<detail::datagram_impl> impl_;
};

namespace detail {
// The datagram socket's entries into lib/ (see detail/pending_operation.hpp).
using endpoint_operation = pending_operation<void(error_code, datagram_endpoint)>;
using datagram_receive_operation =
    pending_operation<void(error_code, std::size_t, datagram_endpoint)>;
void start_datagram_resolve(datagram_impl* impl, std::string host, std::uint16_t port,
                            endpoint_operation&& pending);
void start_datagram_join(datagram_impl* impl, std::string group, endpoint_operation&& pending);
void start_datagram_send(datagram_impl* impl, const buffer_view<boost::asio::const_buffer>& buffers,
                         const datagram_endpoint& peer,
                         pending_operation<void(error_code, std::size_t)>&& pending);
void start_datagram_receive(datagram_impl* impl,
                            const buffer_view<boost::asio::mutable_buffer>& buffers,
                            datagram_receive_operation&& pending);

/// The base of datagram_socket's initiation objects: the socket's state, held by value (a
/// deferred operation keeps it alive), and a pointer to the socket's executor. Each
/// completes with bad_descriptor (posted) on a socket that is not open.
using datagram_initiation = io_initiation<std::shared_ptr<datagram_impl>>;

/// datagram_socket::async_resolve.
class initiate_async_datagram_resolve : public datagram_initiation {
public:
  using datagram_initiation::datagram_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::string host, std::uint16_t port) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, datagram_endpoint());
    start_datagram_resolve(impl_.get(), std::move(host), port,
                           pending<void(error_code, datagram_endpoint)>(std::forward<Handler>(handler)));
  }
};

/// datagram_socket::async_join.
class initiate_async_datagram_join : public datagram_initiation {
public:
  using datagram_initiation::datagram_initiation;
  template <typename Handler> void operator()(Handler&& handler, std::string group) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, datagram_endpoint());
    start_datagram_join(impl_.get(), std::move(group),
                        pending<void(error_code, datagram_endpoint)>(std::forward<Handler>(handler)));
  }
};

/// datagram_socket::async_send_to.
class initiate_async_datagram_send : public datagram_initiation {
public:
  using datagram_initiation::datagram_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers, const datagram_endpoint& peer) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, std::size_t(0));
    start_datagram_send(impl_.get(), buffers.view(), peer,
                        pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// datagram_socket::async_receive_from.
class initiate_async_datagram_receive : public datagram_initiation {
public:
  using datagram_initiation::datagram_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers) const {
    if (!impl_)
      return closed(std::move(handler), boost::asio::error::bad_descriptor, std::size_t(0),
                    datagram_endpoint());
    start_datagram_receive(
        impl_.get(), buffers.view(),
        pending<void(error_code, std::size_t, datagram_endpoint)>(std::forward<Handler>(handler)));
  }
};
} // namespace detail

/// \cond INTERNAL (definitions of the templates declared above)
template <typename CompletionToken>
auto datagram_socket::async_resolve(std::string host, std::uint16_t port, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, datagram_endpoint)>(
      detail::initiate_async_datagram_resolve(impl_, ex_), token, std::move(host), port);
}

template <typename CompletionToken>
auto datagram_socket::async_join(std::string group, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, datagram_endpoint)>(
      detail::initiate_async_datagram_join(impl_, ex_), token, std::move(group));
}

template <typename ConstBufferSequence, typename CompletionToken>
requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value auto
datagram_socket::async_send_to(const ConstBufferSequence& buffers, const datagram_endpoint& peer,
                               CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
      detail::initiate_async_datagram_send(impl_, ex_), token,
      detail::capture_buffers<boost::asio::const_buffer>(buffers), peer);
}

template <typename MutableBufferSequence, typename CompletionToken>
requires boost::asio::is_mutable_buffer_sequence<MutableBufferSequence>::value auto
datagram_socket::async_receive_from(const MutableBufferSequence& buffers, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken,
                                     void(error_code, std::size_t, datagram_endpoint)>(
      detail::initiate_async_datagram_receive(impl_, ex_), token,
      detail::capture_buffers<boost::asio::mutable_buffer>(buffers));
}

/// \endcond
} // namespace asio_rdma
