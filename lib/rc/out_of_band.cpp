// Reliable connections without rdma_cm: prepared_queue_pair, and the part of
// connection_impl that creates the queue pair itself and moves it through
// INIT -> RTR -> RTS from the peer's queue_pair_endpoint. Everything after
// that (data path, close) is connection_impl's, as for rdma_cm connections.
#include "error_message.hpp"
#include "internal_access.hpp"
#include "rc/connection_impl.hpp"
#include "rc/qp_timers.hpp"
#include "verbs/gid_table.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/prepared_queue_pair.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace asio_rdma {
namespace detail {

namespace {

bool is_ipv4_mapped(const ibv_gid& gid) {
  static constexpr std::uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof prefix) == 0;
}

// The GID a RoCE queue pair sends from: `wanted` if given (checked), else the
// first RoCE v2 entry holding an IPv4 address, else the first RoCE v2 entry,
// else entry 0 (what rdma_cm would choose for an IPv4 peer).
error_code choose_gid(ibv_context* context, std::uint8_t port, int table_length,
                      std::uint8_t link_layer, int wanted, int& index) {
  if (wanted >= 0) {
    ibv_gid_entry entry{};
    if (wanted >= table_length || ::ibv_query_gid_ex(context, port, wanted, &entry, 0) != 0)
      return asio::error::invalid_argument;
    index = wanted;
    return {};
  }
  int ipv4_v2 = -1, any_v2 = -1;
  auto ec = for_each_gid(context, port, table_length, link_layer, [&](const ibv_gid_entry& entry) {
    if (entry.gid_type != IBV_GID_TYPE_ROCE_V2)
      return true;
    if (is_ipv4_mapped(entry.gid)) {
      ipv4_v2 = static_cast<int>(entry.gid_index);
      return false;
    }
    if (any_v2 < 0)
      any_v2 = static_cast<int>(entry.gid_index);
    return true;
  });
  index = ipv4_v2 >= 0 ? ipv4_v2 : any_v2 >= 0 ? any_v2 : 0;
  return ec;
}

std::uint32_t random_psn() {
  std::random_device seed;
  return seed() & 0xffffff;
}

} // namespace

error_code connection_impl::prepare_out_of_band(std::shared_ptr<void> device_list,
                                                ibv_context* context, std::uint8_t port,
                                                int gid_index, queue_pair_endpoint& local) {
  out_of_band_ = true;
  device_list_ = std::move(device_list);
  // An iWARP queue pair runs over a TCP connection that only its connection manager
  // makes: one moved to RTS by hand has nothing to send on (siw: EINVAL).
  if (context->device->transport_type == IBV_TRANSPORT_IWARP)
    return with_message(errc::operation_not_supported,
                        std::string(::ibv_get_device_name(context->device)) +
                            " is an iWARP device: its queue pairs connect only through the "
                            "connection manager, not out of band");
  port_num_ = port;
  // Private data has no carrier here: any length is ignored, not refused.
  if (auto ec = options_.validate(std::numeric_limits<std::size_t>::max()))
    return ec;
  ibv_port_attr port_attr{};
  if (port == 0 || ::ibv_query_port(context, port, &port_attr) != 0)
    return asio::error::invalid_argument; // no such port
  link_layer_ = port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? 2 : 1;
  path_mtu_code_ = port_attr.active_mtu;
  ibv_gid gid{};
  if (link_layer_ == 2 || gid_index >= 0) {
    if (auto ec = choose_gid(context, port, port_attr.gid_tbl_len, port_attr.link_layer,
                             gid_index, gid_index_))
      return ec;
    if (int rc = ::ibv_query_gid(context, port, gid_index_, &gid))
      return from_returned_errno(rc);
  }
  if (auto ec = create_resources(context))
    return ec;
  psn_ = random_psn();

  local = {};
  local.qp_num = qp_->qp_num;
  local.psn = psn_;
  local.lid = port_attr.lid;
  local.port = port;
  local.link_layer = link_layer_;
  local.mtu = 128u << path_mtu_code_;
  std::memcpy(local.gid.data(), gid.raw, 16);
  local.responder_resources = static_cast<std::uint8_t>(
      std::min<int>(options_.responder_resources, device_->attributes.max_qp_rd_atom));
  local.initiator_depth = static_cast<std::uint8_t>(
      std::min<int>(options_.initiator_depth, device_->attributes.max_qp_init_rd_atom));
  return {};
}

error_code connection_impl::create_out_of_band_qp(ibv_qp_init_attr& init) {
  qp_ = ::ibv_create_qp(pd(), &init);
  if (!qp_)
    return from_errno();
  // INIT at once: receives can only be posted from INIT on, and they must be
  // posted before the peer may send.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port_num_;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = ::ibv_modify_qp(
          qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ::ibv_destroy_qp(qp_);
    qp_ = nullptr;
    return from_returned_errno(rc);
  }
  return {};
}

error_code connection_impl::connect_out_of_band(const queue_pair_endpoint& remote) {
  if (!out_of_band_ || state_ != state::idle || !qp_created_)
    return asio::error::bad_descriptor;
  if (auto ec = remote.check())
    return ec;
  if (remote.link_layer != link_layer_)
    return errc::endpoint_mismatch;

  // RTR: where the peer is, and what we accept from it.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  std::uint32_t remote_mtu_code = 1;
  while ((128u << remote_mtu_code) < remote.mtu)
    ++remote_mtu_code;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(path_mtu_code_, remote_mtu_code));
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = static_cast<std::uint8_t>(
      std::max(1, std::min<int>(options_.responder_resources, device_->attributes.max_qp_rd_atom)));
  // rdma_cm's RTR would leave the RNR NAK timer at 655 ms (see set_rnr_timer).
  attr.min_rnr_timer = rnr_timer_code(options_.rnr_retry_delay);
  attr.ah_attr.port_num = port_num_;
  attr.ah_attr.dlid = remote.lid;
  if (link_layer_ == 2) { // RoCE: routed by GID
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index_);
    attr.ah_attr.grh.hop_limit = 64;
  }
  int rc = ::ibv_modify_qp(qp_, &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc == 0) {
    // RTS: the transport timers of connection_options, as rdma_cm
    // connections get them (ack timeout, retry count; RNR: retry forever).
    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = options_.ack_timeout_exponent;
    attr.retry_cnt = options_.retry_count;
    attr.rnr_retry = 7;
    attr.sq_psn = psn_;
    attr.max_rd_atomic = static_cast<std::uint8_t>(std::max(
        1, std::min<int>({options_.initiator_depth, device_->attributes.max_qp_init_rd_atom,
                          std::max<int>(remote.responder_resources, 1)})));
    rc = ::ibv_modify_qp(qp_, &attr,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  if (rc != 0) {
    close();
    return from_returned_errno(rc);
  }
  state_ = state::open;
  self_.hold(shared_from_this());
  sync_interest();
  arm_keepalive();
  return {};
}

} // namespace detail

// ---------------------------------------------------------------- prepared_queue_pair

namespace {

struct device_list_deleter {
  void operator()(void* list) const noexcept {
    ::rdma_free_devices(static_cast<ibv_context**>(list));
  }
};

bool port_active(ibv_context* context, std::uint8_t port) {
  ibv_port_attr attr{};
  return ::ibv_query_port(context, port, &attr) == 0 && attr.state == IBV_PORT_ACTIVE;
}

} // namespace

prepared_queue_pair::prepared_queue_pair() noexcept = default;

prepared_queue_pair::prepared_queue_pair(const executor_type& ex, const queue_pair_location& where,
                                         const connection_options& options) {
  error_code ec;
  *this = prepared_queue_pair(ex, where, options, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::prepared_queue_pair");
}

prepared_queue_pair::prepared_queue_pair(const executor_type& ex, const queue_pair_location& where,
                                         const connection_options& options, error_code& ec) {
  // librdmacm's device contexts: the same ones (and so the same protection
  // domain) as rdma_cm connections on this device use. The list is kept for
  // as long as the queue pair lives.
  int count = 0;
  ibv_context** list = ::rdma_get_devices(&count);
  if (!list) {
    ec = errc::no_device;
    return;
  }
  std::shared_ptr<void> holder(list, device_list_deleter());
  ibv_context* context = nullptr;
  for (int i = 0; i < count && !context; ++i) {
    if (where.device.empty() ? port_active(list[i], where.port)
                             : where.device == ::ibv_get_device_name(list[i]->device))
      context = list[i];
  }
  if (!context) {
    ec = errc::no_device;
    return;
  }
  auto impl = std::make_shared<detail::connection_impl>(ex, options);
  ec = impl->prepare_out_of_band(std::move(holder), context, where.port, where.gid_index, local_);
  if (ec) {
    impl->close();
    local_ = {};
    return;
  }
  impl_ = std::move(impl);
}

prepared_queue_pair::prepared_queue_pair(prepared_queue_pair&& other) noexcept
    : impl_(std::move(other.impl_)), local_(std::exchange(other.local_, {})) {}

prepared_queue_pair& prepared_queue_pair::operator=(prepared_queue_pair&& other) noexcept {
  if (this != &other) {
    if (impl_)
      impl_->close();
    impl_ = std::move(other.impl_);
    local_ = std::exchange(other.local_, {});
  }
  return *this;
}

prepared_queue_pair::~prepared_queue_pair() {
  if (impl_)
    impl_->close();
}

connection prepared_queue_pair::connect(const queue_pair_endpoint& remote) {
  error_code ec;
  auto conn = connect(remote, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::prepared_queue_pair::connect");
  return conn;
}

connection prepared_queue_pair::connect(const queue_pair_endpoint& remote, error_code& ec) {
  if (!impl_) {
    ec = asio::error::bad_descriptor;
    return connection();
  }
  ec = impl_->connect_out_of_band(remote);
  if (ec) {
    if (ec != errc::bad_endpoint && ec != errc::endpoint_mismatch) {
      impl_.reset(); // the device refused: the queue pair was closed
      local_ = {};
    }
    return connection();
  }
  local_ = {};
  return detail::internal_access::make_connection(std::move(impl_));
}

ibv_qp* prepared_queue_pair::native_queue_pair() const noexcept {
  return impl_ ? impl_->qp() : nullptr;
}

ibv_pd* prepared_queue_pair::native_protection_domain() const noexcept {
  return impl_ ? impl_->pd() : nullptr;
}

} // namespace asio_rdma
