// asio-rdma: error model.
//
// Every failure is reported as a boost::system::error_code (the type Asio uses):
//  - errno values from libibverbs / librdmacm and the OS are in
//    boost::system::system_category(), so `ec == boost::asio::error::operation_aborted`,
//    `ec == boost::asio::error::timed_out` etc. hold as with sockets;
//  - the status of a failed work completion (ibv_wc_status) is in wc_category(),
//    and compares equal to the coarse wc_condition values (flushed, local,
//    remote, transport);
//  - the library's own errors are asio_rdma::errc values in rdma_category().
#pragma once

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include <iosfwd>
#include <type_traits>

namespace asio_rdma {

using error_code = boost::system::error_code;

/// Errors raised by asio-rdma itself (as opposed to the OS, verbs or the NIC).
enum class errc {
  /// The peer rejected the connection request; its private data, if any, is
  /// available from the failed connect's result.
  rejected = 1,
  /// A message is larger than the connection's maximum message size (or, for
  /// a datagram, the path MTU); nothing was posted.
  message_too_large,
  /// The buffer given to async_receive is smaller than the message that
  /// arrived. The message stays queued: retry with a larger buffer.
  buffer_too_small,
  /// rdma_cm could not resolve the address to an RDMA device.
  address_resolution_failed,
  /// rdma_cm could not resolve a route to the peer.
  route_resolution_failed,
  /// The peer did not answer (RDMA_CM_EVENT_UNREACHABLE).
  unreachable,
  /// Connection establishment failed (RDMA_CM_EVENT_CONNECT_ERROR).
  connection_error,
  /// The RDMA device was removed (RDMA_CM_EVENT_DEVICE_REMOVAL).
  device_removed,
  /// The peer sent something that violates the protocol in use (for example
  /// a malformed buffer advertisement or file transfer header).
  protocol_error,
  /// An offset/length pair lies outside its memory region; nothing was posted.
  out_of_bounds,
  /// An atomic operation's remote address is not 8-byte aligned.
  misaligned,
  /// No RDMA device is available for the requested address or interface.
  no_device,
  /// The device cannot open raw packet queue pairs or install flow rules
  /// (SoftRoCE, iWARP, or missing CAP_NET_RAW).
  raw_packet_unsupported,
  /// More flow rules than the socket was opened for.
  too_many_flows,
  /// An option value is out of its valid range.
  invalid_option,
  /// The remote side of a file transfer reported a failure.
  remote_failure,
  /// A file of the sent name already exists on the receiver, whose overwrite
  /// policy refuses to replace it ("file exists on receiver").
  file_exists,
  /// The file is larger than the receiver's maximum file size.
  file_too_large,
  /// The receiver has not enough free space for the file, or ran out of it
  /// while writing ("no space on receiver").
  no_space,
  /// The sender did not prove it knows the receiver's shared secret, or the
  /// receiver asked for one the sender does not have ("authentication failed").
  authentication_failed,
  /// The receiver refused the connection or file: too many connections from
  /// the sender's address, or too many files in flight.
  too_many_requests,
  /// A queue_pair_endpoint is malformed: not 40 bytes, another magic or
  /// version, or a field out of range (QP number or PSN beyond 24 bits, QP
  /// number 0, an unknown MTU, no GID on RoCE, no LID on InfiniBand).
  bad_endpoint,
  /// A well-formed queue_pair_endpoint that this queue pair cannot connect
  /// to (the other end's port has another link layer).
  endpoint_mismatch,
  /// The file transfer's receiver had the whole, verified file but could not
  /// store it under its name: its filesystem refused the commit (fsync, link
  /// or rename); the receiver's receive_result::failure names the step.
  store_failed,
  /// The RDMA device lacks what the operation needs, so nothing was posted:
  /// immediate data (write or send with immediate), unreliable datagrams and
  /// out-of-band queue pairs (prepared_queue_pair: iWARP connects only
  /// through its TCP connection manager) on iWARP, atomics on a device whose
  /// device_info reports
  /// atomic_capability::none. device_info says what a device has. The
  /// error's message() names the device and what it lacks ("siw0 is an iWARP
  /// device: iWARP has no write or send with immediate data").
  operation_not_supported,
  /// The options ask for more than the RDMA device allows, so no queue pair
  /// was made: a queue depth beyond device_limits::max_qp_wr (or
  /// max_srq_wr), or more completion queue entries than max_cqe (the send
  /// and receive depths together). Sizes the library can fit (scatter/gather
  /// entries, inline data, read/atomic depths) are clamped instead. Also a
  /// queue the device refused without an errno (SoftiWARP, past about 144
  /// pages of queues in one process: docs/devices.md). The
  /// error's message() names the size, the device and its limit ("send queue
  /// depth 16384 exceeds siw0's maximum 4096 (max_qp_wr)"); errors equal to
  /// this one compare equal whatever their message.
  device_limit_exceeded,
};

/// The category of asio_rdma::errc ("asio_rdma").
const boost::system::error_category& rdma_category() noexcept;

/// Makes errc usable as an error_code.
inline error_code make_error_code(errc e) noexcept {
  return error_code(static_cast<int>(e), rdma_category());
}

/// Writes the error's message (for logs and test diagnostics).
std::ostream& operator<<(std::ostream& os, errc e);

/// The category of ibv_wc_status values ("ibv_wc_status"); messages come from
/// ibv_wc_status_str.
const boost::system::error_category& wc_category() noexcept;

/// The error_code of a failed work completion: `status` is an ibv_wc_status
/// value (such as IBV_WC_WR_FLUSH_ERR, which converts to int implicitly).
/// Taking an int keeps this header free of the verbs headers.
inline error_code make_wc_error(int status) noexcept {
  return error_code(status, wc_category());
}

/// Coarse classes of work completion failures, for comparisons such as
/// `ec == asio_rdma::wc_condition::remote`.
enum class wc_condition {
  /// The work request was flushed because the queue pair entered the error
  /// state (after a disconnect, close() or an earlier failure).
  flushed = 1,
  /// A local error: bad length, protection or queue pair state on this side.
  local,
  /// The remote side refused the access: bad rkey, missing permission,
  /// invalid request or a remote operation error.
  remote,
  /// The transport gave up: retries exceeded, RNR retries exceeded.
  transport,
};

/// The category of wc_condition.
const boost::system::error_category& wc_condition_category() noexcept;

/// Writes the condition's message.
std::ostream& operator<<(std::ostream& os, wc_condition c);

inline boost::system::error_condition make_error_condition(wc_condition c) noexcept {
  return boost::system::error_condition(static_cast<int>(c), wc_condition_category());
}

} // namespace asio_rdma

namespace boost::system {
template <> struct is_error_code_enum<asio_rdma::errc> : std::true_type {};
template <> struct is_error_condition_enum<asio_rdma::wc_condition> : std::true_type {};
} // namespace boost::system
