// asio-rdma: a reliable connection set up without rdma_cm. Each side creates
// a prepared_queue_pair, sends its endpoint() to the other over any channel,
// and connects to the endpoint it received:
//
//   asio_rdma::prepared_queue_pair qp(ex, {.device = "mlx5_0"});
//   co_await asio::async_write(tcp, asio::buffer(qp.endpoint().to_bytes()));
//   std::array<std::byte, asio_rdma::queue_pair_endpoint::encoded_size> theirs;
//   co_await asio::async_read(tcp, asio::buffer(theirs));
//   asio_rdma::connection conn = qp.connect(asio_rdma::queue_pair_endpoint::from_bytes(theirs));
//   // ... tell the peer you are connected (one byte over tcp), wait for its
//   // word, then use conn as any connection: send/receive, read/write,
//   // write with immediate, atomics.
//
// This is the handshake of the Rust ibverbs crate (PreparedQueuePair and
// QueuePairEndpoint), and of perftest without -R.
#pragma once

#include <asio_rdma/connection.hpp>
#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/error.hpp>
#include <asio_rdma/queue_pair_endpoint.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

struct ibv_qp;
struct ibv_pd;

namespace asio_rdma {

namespace detail {
class connection_impl;
} // namespace detail

/// Where a prepared_queue_pair lives: a device, one of its ports, and the GID
/// it sends from.
struct queue_pair_location {
  /// The device's name (as list_devices() reports it, e.g. "rxe0"); empty:
  /// the first device with an active port.
  std::string device;
  /// The port number, counting from 1.
  std::uint8_t port = 1;
  /// The GID table index it sends from; -1: the first RoCE v2 entry that
  /// holds an IPv4 address, else the first RoCE v2 entry, else entry 0.
  int gid_index = -1;
};

/// A reliable (RC) queue pair that is not connected yet: the first half of an
/// out-of-band connection. It has its queues, receive buffers (already
/// posted) and its endpoint; connect() brings it to the peer's endpoint
/// (INIT -> RTR -> RTS with options' ack timeout, retry count, RNR timer and
/// read/atomic depths) and turns it into an asio_rdma::connection, on which
/// every operation of connection works.
///
/// Differences from an rdma_cm connection, all following from the absence of
/// a connection manager:
/// - Nothing tells the peer when this side closes (close() moves the queue
///   pair to the error state, which flushes all posted work here, and
///   async_disconnect completes at once). Say goodbye over your own channel;
///   otherwise the peer learns it only when its next operation exhausts the
///   transport's retries (IBV_WC_RETRY_EXC_ERR), or from keepalive
///   (connection_options::keepalive_interval). A receive waiting on a peer
///   that is gone waits until then.
/// - A message sent before the peer's connect() has moved its queue pair to
///   RTR is dropped by the peer's device and sent again by the transport
///   (after the ack timeout); let the peer say that it is connected first.
/// - connection::native_handle() (the rdma_cm id), local_endpoint() and
///   remote_endpoint() have nothing to report: null and unspecified.
///   native_queue_pair() and native_protection_domain() work.
/// - connection_options::private_data, timeout and source_address do not
///   apply.
///
/// The protection domain is the device's one that rdma_cm connections use
/// too: memory registered for any connection on the device serves this one.
///
/// Threading: as connection (use it from its executor); move-only. The
/// library starts no thread.
class prepared_queue_pair {
public:
  /// The executor of the connection it becomes.
  using executor_type = boost::asio::any_io_executor;

  /// Not a queue pair: endpoint() is empty, connect() fails with
  /// asio::error::bad_descriptor.
  prepared_queue_pair() noexcept;
  /// Opens `where` (a device and port), creates the queue pair with
  /// `options`' sizes, posts its receive buffers and moves it to INIT.
  /// Throws boost::system::system_error: errc::no_device (no such device or
  /// no active port), errc::operation_not_supported (an iWARP device: its
  /// queue pairs connect only through rdma_cm, over TCP), errc::invalid_option,
  /// asio::error::invalid_argument (no such port or GID index), or the
  /// device's refusal.
  explicit prepared_queue_pair(const executor_type& ex, const queue_pair_location& where = {},
                               const connection_options& options = {});
  /// As above; reports failure through `ec` (the object is then empty).
  prepared_queue_pair(const executor_type& ex, const queue_pair_location& where,
                      const connection_options& options, error_code& ec);
  /// Takes over `other`'s queue pair; `other` is left empty.
  prepared_queue_pair(prepared_queue_pair&& other) noexcept;
  /// Releases this queue pair, then takes over `other`'s.
  prepared_queue_pair& operator=(prepared_queue_pair&& other) noexcept;
  prepared_queue_pair(const prepared_queue_pair&) = delete;
  prepared_queue_pair& operator=(const prepared_queue_pair&) = delete;
  /// Destroys the queue pair unless connect() turned it into a connection.
  ~prepared_queue_pair();

  /// True until connect() succeeded (or after a failed construction: false).
  bool is_open() const noexcept { return impl_ != nullptr; }

  /// What the peer needs to connect to this queue pair: send it to the peer.
  /// A default endpoint if !is_open().
  const queue_pair_endpoint& endpoint() const noexcept { return local_; }

  /// Connects to the peer's queue pair `remote` (INIT -> RTR -> RTS) and
  /// returns the open connection; this object is empty afterwards. The call
  /// is synchronous and short (two ibv_modify_qp calls), and sends nothing.
  ///
  /// Errors: errc::bad_endpoint (see queue_pair_endpoint::check),
  /// errc::endpoint_mismatch (another link layer) — in both cases nothing
  /// changed and connect() may be called again with another endpoint;
  /// asio::error::bad_descriptor (empty); the device's refusal of a
  /// transition (the queue pair is then closed and this object empty).
  /// Throws boost::system::system_error.
  connection connect(const queue_pair_endpoint& remote);
  /// As above; reports failure through `ec` (and returns a connection that is
  /// not open).
  connection connect(const queue_pair_endpoint& remote, error_code& ec);

  /// The queue pair (for queries; do not post to it or change its state).
  ibv_qp* native_queue_pair() const noexcept;
  /// The device's protection domain (e.g. to register memory_region before
  /// connecting, with the memory_region(ibv_pd*, ...) constructors).
  ibv_pd* native_protection_domain() const noexcept;

private:
  std::shared_ptr<detail::connection_impl> impl_;
  queue_pair_endpoint local_;
};

} // namespace asio_rdma
