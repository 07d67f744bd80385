#include <asio_rdma/error.hpp>

#include "error_message.hpp"

#include <infiniband/verbs.h>

#include <ostream>
#include <string>

namespace asio_rdma {
namespace {

class rdma_category_impl final : public boost::system::error_category {
public:
  rdma_category_impl() noexcept : error_category(detail::rdma_category_id) {}
  const char* name() const noexcept override { return "asio_rdma"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
    case errc::rejected: return "connection rejected by the peer";
    case errc::message_too_large: return "message larger than the maximum message size (the connection's, or the path MTU for a datagram)";
    case errc::buffer_too_small: return "receive buffer smaller than the arrived message";
    case errc::address_resolution_failed: return "address resolution failed (no RDMA device for it?)";
    case errc::route_resolution_failed: return "route resolution failed";
    case errc::unreachable: return "peer unreachable";
    case errc::connection_error: return "connection establishment failed";
    case errc::device_removed: return "RDMA device removed";
    case errc::protocol_error: return "protocol violation by the peer";
    case errc::out_of_bounds: return "offset and length lie outside the memory region";
    case errc::misaligned: return "atomic operation address is not 8-byte aligned";
    case errc::no_device: return "no RDMA device available";
    case errc::raw_packet_unsupported:
      return "device does not support raw packet queue pairs / flow steering (or CAP_NET_RAW is missing)";
    case errc::too_many_flows: return "too many flow rules for this socket";
    case errc::invalid_option: return "option value out of range";
    case errc::remote_failure: return "the remote side reported a failure";
    case errc::file_exists: return "file exists on receiver";
    case errc::file_too_large: return "file larger than the receiver's maximum file size";
    case errc::no_space: return "no space on receiver";
    case errc::authentication_failed: return "authentication failed";
    case errc::too_many_requests: return "too many connections or files in flight from this peer";
    case errc::bad_endpoint: return "malformed queue pair endpoint";
    case errc::endpoint_mismatch:
      return "queue pair endpoint does not match this queue pair (another link layer)";
    case errc::store_failed:
      return "receiver could not store the file: its filesystem refused the commit";
    case errc::operation_not_supported:
      return "the RDMA device does not support this operation (immediate data, datagrams and "
             "out-of-band queue pairs need InfiniBand or RoCE, not iWARP; atomics need a "
             "device with atomics)";
    case errc::device_limit_exceeded:
      return "the options ask for more than the RDMA device allows (queue depth or completion "
             "queue entries beyond its device_info limits)";
    }
    return "unknown asio_rdma error " + std::to_string(value);
  }
};

bool is_flush(int s) { return s == IBV_WC_WR_FLUSH_ERR; }
bool is_local(int s) {
  return s == IBV_WC_LOC_LEN_ERR || s == IBV_WC_LOC_QP_OP_ERR || s == IBV_WC_LOC_EEC_OP_ERR ||
         s == IBV_WC_LOC_PROT_ERR || s == IBV_WC_MW_BIND_ERR || s == IBV_WC_LOC_ACCESS_ERR ||
         s == IBV_WC_LOC_RDD_VIOL_ERR || s == IBV_WC_GENERAL_ERR || s == IBV_WC_FATAL_ERR;
}
bool is_remote(int s) {
  return s == IBV_WC_BAD_RESP_ERR || s == IBV_WC_REM_INV_REQ_ERR || s == IBV_WC_REM_ACCESS_ERR ||
         s == IBV_WC_REM_OP_ERR || s == IBV_WC_REM_INV_RD_REQ_ERR || s == IBV_WC_REM_ABORT_ERR ||
         s == IBV_WC_INV_EECN_ERR || s == IBV_WC_INV_EEC_STATE_ERR;
}
bool is_transport(int s) {
  return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_RNR_RETRY_EXC_ERR || s == IBV_WC_RESP_TIMEOUT_ERR;
}

class wc_category_impl final : public boost::system::error_category {
public:
  const char* name() const noexcept override { return "ibv_wc_status"; }
  std::string message(int value) const override {
    return ibv_wc_status_str(static_cast<ibv_wc_status>(value));
  }
  bool equivalent(int value, const boost::system::error_condition& cond) const noexcept override {
    if (cond.category() != wc_condition_category())
      return default_error_condition(value) == cond;
    switch (static_cast<wc_condition>(cond.value())) {
    case wc_condition::flushed: return is_flush(value);
    case wc_condition::local: return is_local(value);
    case wc_condition::remote: return is_remote(value);
    case wc_condition::transport: return is_transport(value);
    }
    return false;
  }
};

class wc_condition_category_impl final : public boost::system::error_category {
public:
  const char* name() const noexcept override { return "asio_rdma.wc_condition"; }
  std::string message(int value) const override {
    switch (static_cast<wc_condition>(value)) {
    case wc_condition::flushed: return "work request flushed";
    case wc_condition::local: return "local work completion error";
    case wc_condition::remote: return "remote work completion error";
    case wc_condition::transport: return "transport retries exceeded";
    }
    return "unknown wc_condition";
  }
};

} // namespace

std::ostream& operator<<(std::ostream& os, errc e) { return os << make_error_code(e).message(); }
std::ostream& operator<<(std::ostream& os, wc_condition c) {
  return os << wc_condition_category().message(static_cast<int>(c));
}

const boost::system::error_category& rdma_category() noexcept {
  static const rdma_category_impl instance;
  return instance;
}
const boost::system::error_category& wc_category() noexcept {
  static const wc_category_impl instance;
  return instance;
}
const boost::system::error_category& wc_condition_category() noexcept {
  static const wc_condition_category_impl instance;
  return instance;
}

} // namespace asio_rdma
