// asio-rdma: a reliable connected (RC) RDMA connection.
#pragma once

#include <asio_rdma/batch_entry.hpp>
#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/connection_statistics.hpp>
#include <asio_rdma/detail/buffer_array.hpp>
#include <asio_rdma/detail/handlers.hpp>
#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/detail/work_request.hpp>
#include <asio_rdma/error.hpp>
#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

struct ibv_qp;
struct ibv_pd;
struct rdma_cm_id;

namespace asio_rdma {

namespace detail {
class connection_impl;
struct internal_access;
template <typename Handler> struct lend_adapter;
/// The bytes of receive ring slot `slot` of `impl` (lent to async_receive_lent).
const std::byte* lent_bytes(connection_impl* impl, std::uint32_t slot) noexcept;
} // namespace detail

/// What async_receive_message reports about one received message.
struct received_message {
  /// Bytes received: the message's length, or for an RDMA write with
  /// immediate, the length the peer wrote into our memory (nothing is copied
  /// into the receive buffers then).
  std::size_t size = 0;
  /// The immediate value of a send or RDMA write with immediate (host order).
  std::optional<std::uint32_t> immediate;
  /// True if this completion reports an RDMA write with immediate.
  bool rdma_write = false;
  /// \cond INTERNAL
  /// async_receive_lent's message lies in receive ring slot `lent_slot` (its lent_message
  /// takes it over); false for every other receive. In the padding after rdma_write, so
  /// that the copying receives pay nothing for it. Not for users: it owns nothing.
  bool lent = false;
  std::uint32_t lent_slot = 0;
  /// \endcond
};

/// A message left where it arrived, in one of the connection's own receive buffers, and
/// lent to the handler of async_receive_lent: read in place, with no copy (UCX's
/// ucp_stream_recv_data_nb and ucp_stream_data_release, in one object).
///
/// The buffer goes back to the connection, to be posted for a later message, when this
/// object is destroyed or release() is called. Until then it holds one of the
/// connection's receive_queue_depth buffers: while the receiver holds them all, the peer's
/// sends wait for one (as for a receiver that does not read), so return them soon. It
/// keeps its bytes valid after the connection is closed or destroyed. Move-only; release
/// or destroy it on the connection's thread, before the io_context is destroyed, as any
/// of the connection's objects.
class lent_message {
public:
  /// Holds no message.
  lent_message() noexcept = default;
  /// Takes over `other`'s message and buffer; `other` holds none afterwards.
  lent_message(lent_message&& other) noexcept = default;
  /// Gives back the buffer this one holds, then takes over `other`'s.
  lent_message& operator=(lent_message&& other) noexcept {
    if (this != &other) {
      release();
      message_ = other.message_;
      data_ = other.data_;
      lender_ = std::move(other.lender_);
      slot_ = other.slot_;
    }
    return *this;
  }
  ~lent_message() { release(); }

  /// The message's bytes, in the connection's receive buffer. Empty once released, and for
  /// an RDMA write with immediate (its bytes are in the memory the peer wrote; size() says
  /// how many).
  boost::asio::const_buffer data() const noexcept { return {data_, lender_ ? message_.size : 0}; }
  /// The message's size (kept after release()).
  std::size_t size() const noexcept { return message_.size; }
  /// Size, immediate data and kind, as async_receive_message reports them.
  const received_message& message() const noexcept { return message_; }
  /// True while this object holds one of the connection's receive buffers.
  bool holds_buffer() const noexcept { return static_cast<bool>(lender_); }
  /// Gives the buffer back to the connection now (nothing if it holds none).
  void release() noexcept {
    if (lender_)
      give_back();
  }

private:
  template <typename Handler> friend struct detail::lend_adapter;
  lent_message(const received_message& message,
               std::shared_ptr<detail::connection_impl>&& lender) noexcept
      : message_(message), slot_(message.lent_slot) {
    message_.lent = false;
    if (message.lent) {
      lender_ = std::move(lender);
      data_ = detail::lent_bytes(lender_.get(), slot_);
    }
  }
  void give_back() noexcept;

  received_message message_;
  const std::byte* data_ = nullptr;
  std::shared_ptr<detail::connection_impl> lender_; // set while a buffer is held
  std::uint32_t slot_ = 0;
};

/// One RC connection, established by async_connect() or accepted by an
/// acceptor / connection_request (both over rdma_cm), or connected out of band
/// by prepared_queue_pair::connect() (no rdma_cm: see prepared_queue_pair.hpp
/// for what differs). Move-only; destroying it closes it.
///
/// Operations and threads: the connection belongs to the io_context of its
/// executor; call its functions from that io_context's thread (or a strand).
/// Any number of operations may be outstanding at once, from any number of
/// coroutines. Completion handlers run on their associated executor (by
/// default the connection's), never inside an initiating function or close():
/// neither that operation's handler nor any other operation's (a completion
/// such a call finds in the completion queue is delivered from the io_context).
///
/// Buffers passed to an operation must stay valid until it completes.
///
/// While open, a connection waits on its rdma_cm events (it must answer the
/// peer's disconnect), which keeps the io_context's run() going; close it (or
/// destroy it) to let run() return.
///
/// Wire format: the connection puts nothing of its own on the wire: a
/// message sent is exactly the bytes given, and any librdmacm peer that posts
/// receives of max_message_size bytes can talk to it.
class connection {
public:
  /// The type of the executor that runs handlers by default.
  using executor_type = boost::asio::any_io_executor;

  /// A connection that is not open; every operation fails with
  /// asio::error::not_connected.
  connection() noexcept;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  connection(connection&&) noexcept;
  /// Closes this connection (see close()) and takes over `other`'s.
  connection& operator=(connection&& other) noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  /// Closes the connection (see close()).
  ~connection();

  /// The executor the connection's I/O runs on.
  executor_type get_executor() const;

  /// True until close(), a disconnect or a fatal error.
  bool is_open() const noexcept;

  /// The addresses of the two ends (port: the rdma_cm port). Unspecified for
  /// an out-of-band connection (no rdma_cm addresses).
  boost::asio::ip::tcp::endpoint local_endpoint() const;
  /// The peer's address and port.
  boost::asio::ip::tcp::endpoint remote_endpoint() const;

  /// The private data the peer sent in its connect request (acceptor side) or
  /// in its accept or reject reply (connecting side). Zero-padded by the CM on
  /// InfiniBand and RoCE. Also available on the connection returned with
  /// errc::rejected by async_connect.
  std::span<const std::byte> peer_private_data() const noexcept;

  /// The options the connection was established with.
  const connection_options& options() const;

  /// What this connection has posted to its send queue so far (see
  /// connection_statistics). All zero for a connection that is not open and
  /// never was. Use from the connection's executor.
  connection_statistics statistics() const noexcept;

  /// Sends one message made of `buffers` (gathered, at most 16 buffers).
  ///
  /// Completion signature: void(error_code, std::size_t bytes_sent). The data
  /// is copied into registered memory of the library (or inline into the work
  /// request) when the work request is posted, so the message is independent of
  /// later changes to `buffers`; `buffers` must stay valid until the operation
  /// completes.
  ///
  /// When it completes is options().send_completion's choice: by default
  /// (send_completion::at_post) once posted, at the end of the io_context turn
  /// that started it (or of the completion batch whose handler started it),
  /// without waiting for the peer: a later transport error fails the connection
  /// and reaches the pending and later operations instead; with
  /// send_completion::at_acknowledgement once the peer's transport acknowledged
  /// the message.
  ///
  /// Errors: errc::message_too_large (larger than max_message_size, nothing
  /// posted), asio::error::not_connected, asio::error::operation_aborted
  /// (closed or disconnected before completion), a wc_category() error from
  /// the device (at_acknowledgement: e.g. the peer's receive buffer was too
  /// small).
  ///
  /// More sends than the send queue holds wait in order. Cancellation (any
  /// type) is honoured while the send waits for room in the send queue (and,
  /// completed at post, until the end of the turn); once posted, an RC work
  /// request can only be withdrawn by closing the connection, which flushes
  /// every posted request.
  template <typename ConstBufferSequence, typename CompletionToken = boost::asio::deferred_t>
    requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value
  auto async_send(const ConstBufferSequence& buffers, CompletionToken&& token = {});

  /// The same with 32-bit immediate data (host order), which the receiver
  /// sees in received_message::immediate (async_receive_message).
  template <typename ConstBufferSequence, typename CompletionToken = boost::asio::deferred_t>
    requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value
  auto async_send_with_imm(const ConstBufferSequence& buffers, std::uint32_t immediate,
                           CompletionToken&& token = {});

  /// Zero-copy send from registered memory: one buffer, or a gather list of
  /// up to min(16, options().max_send_sge) buffers (libiwarp's post_send_lmr /
  /// post_send_sgl). The device reads the memory until the operation
  /// completes: do not change it before. Completion signature:
  /// void(error_code, std::size_t). Errors as for async_send, plus
  /// errc::out_of_bounds for an out-of-bounds slice (nothing posted).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_send(const local_buffer& buffer, CompletionToken&& token = {});
  template <typename CompletionToken = boost::asio::deferred_t>
  /// As above, with a gather/scatter list of local buffers (at most options().max_send_sge).
  auto async_send(std::span<const local_buffer> buffers, CompletionToken&& token = {});

  /// RDMA write: copies `local` (one buffer or a gather list) into the peer's
  /// `remote` memory, which must have been registered with
  /// access::remote_write. The peer's CPU is not involved and sees no
  /// completion. Completion signature: void(error_code, std::size_t bytes).
  ///
  /// Checked before posting: every slice in bounds, total length <=
  /// remote.length (errc::out_of_bounds), at most max_send_sge entries
  /// (asio::error::invalid_argument). A bad rkey or missing permission fails
  /// with a wc_category() error (wc_condition::remote) and fails the
  /// connection, as RC requires. `local` must not change until completion.
  /// Cancellation: as for async_send.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_write(const local_buffer& local, const remote_buffer& remote,
                   CompletionToken&& token = {});
  template <typename CompletionToken = boost::asio::deferred_t>
  /// As above, with a gather/scatter list of local buffers (at most options().max_send_sge).
  auto async_write(std::span<const local_buffer> local, const remote_buffer& remote,
                   CompletionToken&& token = {});

  /// RDMA write with immediate: as async_write, and the peer's next receive
  /// completes with received_message{size, immediate, rdma_write = true}.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_write_with_imm(const local_buffer& local, const remote_buffer& remote,
                            std::uint32_t immediate, CompletionToken&& token = {});

  /// RDMA read: copies the peer's `remote` memory (registered with
  /// access::remote_read) into `local` (one buffer or a scatter list, from
  /// regions registered with access::local_write). The local memory is
  /// written by the device until the operation completes. Completion
  /// signature: void(error_code, std::size_t bytes). Checks and errors as for
  /// async_write.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_read(const local_buffer& local, const remote_buffer& remote,
                  CompletionToken&& token = {});
  template <typename CompletionToken = boost::asio::deferred_t>
  /// As above, with a gather/scatter list of local buffers (at most options().max_send_sge).
  auto async_read(std::span<const local_buffer> local, const remote_buffer& remote,
                  CompletionToken&& token = {});

  /// Atomically adds `value` to the 8-byte word at `remote` (registered with
  /// access::remote_atomic). Completion signature:
  /// void(error_code, std::uint64_t previous_value). errc::misaligned if the
  /// address is not 8-byte aligned, errc::out_of_bounds if remote.length < 8.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_fetch_add(const remote_buffer& remote, std::uint64_t value,
                       CompletionToken&& token = {});

  /// Atomically replaces the 8-byte word at `remote` by `desired` if it
  /// equals `expected`. Completion signature:
  /// void(error_code, std::uint64_t previous_value): the swap happened iff
  /// previous_value == expected. Checks as for async_fetch_add.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_compare_swap(const remote_buffer& remote, std::uint64_t expected,
                          std::uint64_t desired, CompletionToken&& token = {});

  /// Posts every request of `entries` (sends, RDMA writes with or without
  /// immediate data, RDMA reads; see batch_entry) in order, as one operation:
  /// the requests are chained into as few ibv_post_send calls as the send
  /// queue allows (one when it has room), one request in 16 and the last ask
  /// for a completion, and one handler runs when all have completed. What perftest's
  /// post lists (--post_list) do, for many small messages at little cost each.
  ///
  /// Completion signature: void(error_code, std::size_t bytes): the bytes of
  /// all requests, or 0 with the first error. The entries are copied at
  /// initiation (for a deferred operation: when it is launched), so `entries`
  /// only has to live until then; the local memory each entry names is used
  /// by the device until the batch completes.
  ///
  /// Checked before anything is posted (then nothing is): at most
  /// options().send_queue_depth entries (asio::error::invalid_argument); every
  /// local slice in bounds, no write or read longer than its remote range
  /// (errc::out_of_bounds); no send larger than max_message_size
  /// (errc::message_too_large). A failure on the wire (a bad rkey, say) fails
  /// the batch with the device's wc_category() error and, as RC requires, the
  /// connection; requests behind it are flushed. An empty batch completes at
  /// once with 0 bytes (posted, not inside this call).
  ///
  /// Other operations initiated before or after it are posted in initiation
  /// order around it. Cancellation (any type) withdraws the whole batch while
  /// none of it is posted (it waits for room in the send queue); once its
  /// first request is posted it completes as posted work does (close()
  /// flushes it).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_batch(std::span<const batch_entry> entries, CompletionToken&& token = {});

  /// Receives the next message into `buffers` (scattered, at most 16 buffers).
  ///
  /// Completion signature: void(error_code, std::size_t bytes_received).
  /// Messages are delivered in order, one per operation. The library keeps its
  /// own receive buffers posted and copies the message out, so `buffers` is
  /// never touched by the device.
  ///
  /// Errors: asio::error::eof once the connection was disconnected (by either
  /// side) and every message received before has been delivered;
  /// errc::buffer_too_small if the message does not fit (the message stays
  /// queued for the next receive); asio::error::operation_aborted on close()
  /// or cancellation; a wc_category() error if the connection failed.
  ///
  /// Cancellation (any type) removes the pending receive; no message is lost.
  template <typename MutableBufferSequence, typename CompletionToken = boost::asio::deferred_t>
  auto async_receive(const MutableBufferSequence& buffers, CompletionToken&& token = {});

  /// As async_receive, reporting the immediate data and the kind of the
  /// message too. Completion signature: void(error_code, received_message).
  template <typename MutableBufferSequence, typename CompletionToken = boost::asio::deferred_t>
  auto async_receive_message(const MutableBufferSequence& buffers, CompletionToken&& token = {});

  /// Receives the next message without copying it: the handler gets the message in the
  /// library's receive buffer (lent_message), to read in place and give back. For large
  /// messages this saves the copy async_receive makes. For a few bytes async_receive costs
  /// less: a buffer given back outside a batch of completions (after the handler's
  /// coroutine has waited again, or when the message was already waiting) costs a task
  /// posted to repost it.
  ///
  /// Completion signature: void(error_code, lent_message). Delivered in order with the
  /// other receives. An RDMA write with immediate lends nothing (its data is where the
  /// peer wrote it): data() is empty, size() its length.
  ///
  /// Errors: those of async_receive but errc::buffer_too_small (every message fits).
  /// Cancellation (any type) removes the pending receive; no message is lost.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_receive_lent(CompletionToken&& token = {});

  /// Advertises `remote` to the peer: sends its 24-byte encoding as one
  /// message (libiwarp's iw_post_send_adv). Completion signature:
  /// void(error_code, std::size_t).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_send_remote_buffer(const remote_buffer& remote, CompletionToken&& token = {});

  /// Awaits the peer's advertisement (libiwarp's iw_wait_recv_adv): the next
  /// message, decoded. Completion signature: void(error_code, remote_buffer).
  /// Errors: asio::error::timed_out after `timeout`; errc::protocol_error if
  /// the message is not a valid advertisement (truncated, unknown version,
  /// or longer than 64 bytes: that one stays queued, as with async_receive's
  /// buffer_too_small); those of async_receive. Cancellation (any type) is
  /// honoured. A composed operation (async_receive and a timer).
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_receive_remote_buffer(std::chrono::milliseconds timeout, CompletionToken&& token = {});

  /// Disconnects gracefully: the peer sees end-of-stream, posted work is
  /// flushed (operation_aborted), pending receives complete with eof.
  ///
  /// Completion signature: void(error_code). Completes when the CM reports
  /// the disconnect, or with asio::error::timed_out after options().timeout.
  /// Cancellation stops the wait; the connection is closed regardless.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_disconnect(CompletionToken&& token = {});

  /// Closes at once: the queue pair is moved to the error state, which
  /// flushes all posted work; every pending operation completes with
  /// asio::error::operation_aborted (once the device has flushed it, so no
  /// handler runs while the device may still use its buffer). The peer sees a
  /// disconnect. Resources are released when the last operation completed.
  void close() noexcept;

  /// The underlying verbs objects, for what the library does not wrap. The
  /// library owns them: do not post to the queue pair, change its state or
  /// destroy any of them. The rdma_cm id is null for an out-of-band
  /// connection (prepared_queue_pair).
  rdma_cm_id* native_handle() const noexcept;
  /// The queue pair (owned by the connection).
  ibv_qp* native_queue_pair() const noexcept;
  /// The protection domain of the connection's device (for memory_region).
  ibv_pd* native_protection_domain() const noexcept;

private:
  friend struct detail::internal_access; // the library's way to impl_ (lib/internal_access.hpp)

  /// Wraps an established connection (the library's, through internal_access).
  explicit connection(std::shared_ptr<detail::connection_impl> impl) noexcept;

  template <typename ConstBufferSequence, typename CompletionToken>
  auto async_send_with_imm_impl(const ConstBufferSequence& buffers,
                                std::optional<std::uint32_t> immediate, CompletionToken&& token);

  std::shared_ptr<detail::connection_impl> impl_;
  executor_type ex_; // the impl's executor, given to the initiations
};

namespace detail {
// A connection's entries into lib/, one per operation, each (implementation, the
// operation's arguments, its pending_operation). Sends, one-sided operations and batches
// complete with a size (an atomic's result travels in it: one type on LP64); every
// receive completes with the received_message, which lends a buffer only to
// async_receive_lent (async_receive's handler reads its size: see size_of_message).
using size_operation = pending_operation<void(error_code, std::size_t)>;
using message_operation = pending_operation<void(error_code, received_message)>;
using connection_operation = pending_operation<void(error_code, connection)>;
void start_send(connection_impl* impl, const buffer_view<boost::asio::const_buffer>& buffers,
                std::optional<std::uint32_t> immediate, size_operation&& op);
void start_work(connection_impl* impl, const work_request& request, size_operation&& op);
void start_batch(connection_impl* impl, std::span<const batch_entry> entries,
                 size_operation&& op);
void start_receive(connection_impl* impl, const buffer_view<boost::asio::mutable_buffer>& buffers,
                   message_operation&& op);
void start_receive_lent(connection_impl* impl, message_operation&& op);
void start_disconnect(connection_impl* impl, pending_operation<void(error_code)>&& op);
} // namespace detail

} // namespace asio_rdma

#include <asio_rdma/impl/connection.hpp>
