// Why a connection stopped being open, and so what each kind of operation
// gets from then on. No verbs call: test/unit/rc/close_reason_test.cpp covers
// the classification without a device.
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/asio/error.hpp>

namespace asio_rdma::detail {

class close_reason {
public:
  /// A device or protocol error ended the connection. The first one is the
  /// reason: later errors are its consequences.
  void failed(error_code ec) noexcept {
    if (ec && !failure_)
      failure_ = ec;
  }
  /// close() or the destructor.
  void closed_locally() noexcept { closed_locally_ = true; }
  /// async_disconnect started.
  void disconnect_requested() noexcept { disconnect_requested_ = true; }
  /// The peer disconnected (rdma_cm's DISCONNECTED while open).
  void peer_disconnected() noexcept { peer_disconnected_ = true; }

  const error_code& failure() const noexcept { return failure_; }
  bool disconnect_was_requested() const noexcept { return disconnect_requested_; }
  bool peer_has_disconnected() const noexcept { return peer_disconnected_; }

  /// A send, write, read or atomic started after the connection stopped
  /// being open.
  error_code for_new_work() const noexcept {
    return failure_ ? failure_ : error_code(boost::asio::error::not_connected);
  }
  /// A receive that finds no message left: the end of the stream (eof) after
  /// a disconnect by either side, operation_aborted after close().
  error_code for_receive() const noexcept {
    if (failure_)
      return failure_;
    if (closed_locally_)
      return boost::asio::error::operation_aborted;
    if (peer_disconnected_ || disconnect_requested_)
      return boost::asio::error::eof;
    return boost::asio::error::not_connected;
  }
  /// Work the close took back: queued, or posted and flushed by the device.
  error_code for_withdrawn_work() const noexcept {
    return failure_ ? failure_ : error_code(boost::asio::error::operation_aborted);
  }
  /// async_disconnect on a connection that is no longer open: done already
  /// if the peer disconnected.
  error_code for_late_disconnect() const noexcept {
    return peer_disconnected_ ? error_code() : error_code(boost::asio::error::not_connected);
  }

private:
  error_code failure_;
  bool closed_locally_ = false;
  bool disconnect_requested_ = false;
  bool peer_disconnected_ = false;
};

} // namespace asio_rdma::detail
