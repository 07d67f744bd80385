// One async_resolve of a datagram socket (datagram_impl::resolve).
#pragma once

#include "ud/datagram_impl.hpp"
#include "ud/ud_addressing.hpp"


#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>

namespace asio_rdma::detail {

/// One async_resolve: its own UDP id goes through address and route
/// resolution and a SIDR request to the peer's listening id, bounded by a timer.
class datagram_resolver final : public cm_event_target {
public:
  datagram_resolver(datagram_impl& owner, const asio::any_io_executor& ex,
                    endpoint_operation&& pending)
      : owner_(owner), ex_(ex), timer_(ex), handler_(std::move(pending)) {}

  void start(const std::string& host, std::uint16_t port) {
    sockaddr_storage dst{};
    if (!make_sockaddr(host, port, dst))
      return finish(boost::asio::error::invalid_argument, {});
    error_code ec;
    id_ = owner_.channel().create_id(this, RDMA_PS_UDP, ec);
    if (ec)
      return finish(ec, {});
    owner_.channel().add_interest();
    interest_ = true;
    // Any cancellation type withdraws a resolve: it has done nothing the caller can see.
    // finish() removes this handler (complete() clears the slot) before the resolver goes.
    handler_.on_cancel(
        [this](boost::asio::cancellation_type) { finish(boost::asio::error::operation_aborted, {}); });
    timer_.expires_after(std::chrono::milliseconds(owner_.resolve_timeout_ms()));
    timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const error_code& e) {
      if (!e && !alive.expired())
        finish(boost::asio::error::timed_out, {});
    });
    const int half = static_cast<int>(owner_.resolve_timeout_ms() / 2 + 1);
    // From the socket's address (so the same device), on an ephemeral port.
    auto src = ephemeral(owner_.bound_address());
    if (::rdma_resolve_addr(id_.get(), reinterpret_cast<sockaddr*>(&src),
                            reinterpret_cast<sockaddr*>(&dst), half) != 0)
      return finish(errc::address_resolution_failed, {});
  }

  void on_cm_event(const cm_event& ev) override {
    switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (::rdma_resolve_route(id_.get(), static_cast<int>(owner_.resolve_timeout_ms() / 2 + 1)))
        finish(errc::route_resolution_failed, {});
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      rdma_conn_param param{};
      if (::rdma_connect(id_.get(), &param) != 0)
        finish(from_errno(), {});
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED: {
      auto handle = std::make_shared<address_handle>();
      handle->owner = owner_.dev();
      ibv_ah_attr attr = ev.ud_ah_attr;
      handle->ah.reset(::ibv_create_ah(owner_.dev()->pd.get(), &attr));
      if (!handle->ah)
        return finish(from_errno(), {});
      datagram_endpoint ep;
      ep.qp_num = ev.ud_qp_num;
      ep.qkey = ev.ud_qkey;
      std::memcpy(ep.gid.data(), attr.grh.dgid.raw, 16);
      ep.address = address_of(rdma_get_peer_addr(id_.get()));
      ep.handle = std::move(handle);
      return finish({}, std::move(ep));
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
      return finish(errc::address_resolution_failed, {});
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return finish(errc::route_resolution_failed, {});
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
      return finish(errc::unreachable, {});
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return finish(errc::connection_error, {});
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return finish(errc::device_removed, {});
    default:
      return;
    }
  }

  /// Completes the handler (once, never from inside the initiating call) and
  /// lets the owner drop this resolver.
  void finish(error_code ec, datagram_endpoint ep) {
    if (done_)
      return;
    done_ = true;
    alive_.reset();
    timer_.cancel();
    if (interest_)
      owner_.channel().remove_interest();
    interest_ = false;
    // Events of this id are acknowledged before dispatch, so it may go now.
    id_.reset();
    handler_.complete(ex_, from::user_call, ec, std::move(ep));
    owner_.forget(this);
  }

private:
  datagram_impl& owner_;
  asio::any_io_executor ex_;
  boost::asio::steady_timer timer_;
  endpoint_operation handler_;
  cm_id_ptr id_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool interest_ = false;
  bool done_ = false;
};

} // namespace asio_rdma::detail
