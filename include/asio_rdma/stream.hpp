// asio-rdma: a byte stream over an RC connection, a model of Asio's AsyncReadStream and
// AsyncWriteStream (so asio::async_read / async_write / async_read_until, asio::ssl::stream
// and Boost.Beast run over RDMA).
#pragma once

#include <asio_rdma/acceptor.hpp>
#include <asio_rdma/connect.hpp>
#include <asio_rdma/connection.hpp>
#include <asio_rdma/detail/buffer_array.hpp>
#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace asio_rdma {

class stream;

namespace detail {
class stream_impl;

// The stream's entries into lib/ (lib/stream/stream.cpp), one per operation.
void start_stream_read(stream_impl* impl, const buffer_view<boost::asio::mutable_buffer>& buffers,
                       pending_operation<void(error_code, std::size_t)>&& op);
void start_stream_write(stream_impl* impl, const buffer_view<boost::asio::const_buffer>& buffers,
                        pending_operation<void(error_code, std::size_t)>&& op);
void start_stream_shutdown(stream_impl* impl, pending_operation<void(error_code)>&& op);
/// \cond INTERNAL
/// The library's own writers (the RPC layer) write at once what there is room for,
/// with no handler (stream_impl::write_now); defined in lib/stream/stream.cpp.
std::size_t stream_write_now(stream& s, const buffer_view<boost::asio::const_buffer>& buffers);
/// \endcond

/// async_read_some.
class initiate_stream_read : public io_initiation<stream_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::not_connected,
                    std::size_t(0));
    start_stream_read(impl_, buffers.view(),
                      pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// async_write_some.
class initiate_stream_write : public io_initiation<stream_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler, typename Buffers>
  void operator()(Handler&& handler, const Buffers& buffers) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::not_connected,
                    std::size_t(0));
    start_stream_write(impl_, buffers.view(),
                       pending<void(error_code, std::size_t)>(std::forward<Handler>(handler)));
  }
};

/// async_shutdown.
class initiate_stream_shutdown : public io_initiation<stream_impl*> {
public:
  using io_initiation::io_initiation;
  template <typename Handler> void operator()(Handler&& handler) const {
    if (!impl_)
      return closed(std::forward<Handler>(handler), boost::asio::error::not_connected);
    start_stream_shutdown(impl_, pending<void(error_code)>(std::forward<Handler>(handler)));
  }
};

} // namespace detail

/// Who moves a stream's bytes from the writer's send buffer into the reader's ring.
enum class stream_transfer : std::uint8_t {
  /// `shared` on SoftRoCE (rxe), `push` elsewhere.
  automatic,
  /// The writer RDMA-writes every byte: on a hardware device that is the NIC's work, no CPU's.
  push,
  /// In a run of writes (another is still in flight), every second post of at least 16 KiB
  /// is left in the writer's send buffer for the reader to RDMA-read. On a software device
  /// an RDMA operation runs in the CPU of the process that posts it, so the writer's CPU
  /// otherwise does all of it: shared, the work splits between the two sides' CPUs. The
  /// peer may then read this side's send buffer (it holds only bytes written to it). A
  /// lone or small write is always written: a pull costs a round trip more.
  shared,
};

/// The memory of one side of a stream. Each side chooses its own; the two need not agree.
struct stream_options {
  /// The ring the peer RDMA-writes this side's incoming bytes into (registered memory,
  /// 4 KiB .. 64 MiB). It bounds the bytes on their way to this side and waiting here
  /// unread: a peer that has filled it waits until this side reads.
  std::size_t ring_size = 256 * 1024;
  /// The registered buffer this side's writes are copied into until the peer's transport
  /// has them (4 KiB .. 64 MiB). A write waits while it is full.
  std::size_t send_buffer_size = 64 * 1024;
  /// How this side's writes reach the peer (the peer's option rules its own writes).
  stream_transfer transfer = stream_transfer::automatic;

  /// Why these options are invalid (a sentence), or nullptr if they are valid.
  const char* invalid() const noexcept {
    constexpr std::size_t min = 4096, max = std::size_t(64) << 20;
    if (ring_size < min || ring_size > max)
      return "ring_size must be 4 KiB..64 MiB";
    if (send_buffer_size < min || send_buffer_size > max)
      return "send_buffer_size must be 4 KiB..64 MiB";
    return nullptr;
  }
};

/// Connection options for a connection that will carry a stream: the defaults, with
/// receive buffers just large enough for the stream's control messages (its data goes
/// straight into the ring), so that they cost kilobytes, not megabytes.
inline connection_options stream_connection_options() noexcept {
  connection_options o;
  o.max_message_size = 64;
  return o;
}

/// A reliable, ordered byte stream over one RC connection: what a TCP socket is to Asio's
/// stream protocols. Models AsyncReadStream and AsyncWriteStream, so every composed
/// operation written for them (asio::async_read, async_write, async_read_until with a
/// dynamic buffer; asio::ssl::stream<asio_rdma::stream>; Boost.Beast's HTTP and
/// WebSocket) runs over it unchanged.
///
/// Made by async_connect_stream() or acceptor::async_accept_stream(), or from an established
/// connection (one connected out of band too). The stream owns the connection; the peer
/// must be an asio_rdma::stream as well. Move-only; destroying it closes it.
///
/// Bytes arrive once, in order and unchanged. A read completes with what has arrived
/// (at least one byte, at most what the buffers hold), a write with the bytes it took
/// (as many as there is room for, from at most 16 buffers): a partial read or write is
/// normal, as on a socket; asio::async_read and async_write loop. A writer that outruns
/// its reader waits for room and never fails for it.
///
/// Operations and threads: as for connection (its io_context's thread or a strand). At
/// most one read and one write (or shutdown) may be pending at a time, as for any Asio
/// stream that composed operations drive; a second one while one is pending fails with
/// asio::error::already_started. Handlers run on their associated executor (default the
/// stream's), never inside the initiating function.
///
/// Wire and memory (docs/stream.md): each side advertises a ring (stream_options); the
/// writer copies its bytes into its send buffer and RDMA-writes them into the peer's ring,
/// telling it how many in the write's immediate data (on iWARP, in a send after it); the
/// reader copies them out and returns the room as credit. A stream's memory is its ring
/// and send buffer plus the connection's buffers: stream_connection_options() gives a
/// connection whose buffers are small, since no data passes through them.
class stream {
public:
  /// The type of the executor that runs handlers by default.
  using executor_type = boost::asio::any_io_executor;
  /// The lowest layer (what asio::ssl::stream and Beast ask for): the stream itself.
  using lowest_layer_type = stream;

  /// A stream that is not open; every operation fails with asio::error::not_connected.
  stream() noexcept;
  /// Takes over an established connection, whose peer does the same: its messages are
  /// this stream's from now on. Registers the ring and send buffer of `options` and sends
  /// the peer this side's advertisement. Throws boost::system::system_error
  /// (errc::invalid_option, or a registration failure).
  explicit stream(connection&& established, const stream_options& options = {});
  /// As above, reporting failure through `ec` (the stream is then not open, and the
  /// connection closed).
  stream(connection&& established, const stream_options& options, error_code& ec);

  /// Move constructor: takes over the other stream, which is left not open.
  stream(stream&&) noexcept;
  /// Closes this stream (see close()) and takes over `other`.
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  /// Closes the stream (see close()).
  ~stream();

  /// The executor the stream's I/O runs on.
  executor_type get_executor() const noexcept { return ex_; }
  /// This stream (the lowest layer of a layered stream such as ssl::stream<stream>).
  lowest_layer_type& lowest_layer() noexcept { return *this; }
  /// This stream (const).
  const lowest_layer_type& lowest_layer() const noexcept { return *this; }
  /// The connection underneath: its endpoints, options and statistics. Do not send,
  /// receive or disconnect on it directly: the stream owns its messages. (Not called
  /// next_layer(): Boost.Beast takes a next_layer() for a layer of the stream to close.)
  const connection& underlying_connection() const noexcept;
  /// The connection underneath, to post one-sided operations on (RDMA read and write of
  /// registered memory, atomics: they share its send queue with the stream's writes and
  /// never touch its messages). Do not send, receive or disconnect on it (a receive
  /// fails at once with invalid_argument: the stream takes every message), and do not move
  /// from it or assign to it: the stream owns its messages and the connection. On a stream
  /// that is not open: a connection that is not open.
  connection& underlying_connection() noexcept;

  /// True until close(), or until the connection ended (disconnect, fatal error).
  bool is_open() const noexcept;

  /// Reads some bytes into `buffers` (AsyncReadStream's read_some).
  ///
  /// Completion signature: void(error_code, std::size_t bytes_read). Completes once at
  /// least one byte has arrived, with as many as are there and fit; a read into empty
  /// buffers completes at once with 0. Errors: asio::error::eof after the peer's
  /// async_shutdown (or disconnect) once every byte before it has been read;
  /// asio::error::not_connected on a stream that is not open;
  /// asio::error::operation_aborted on close() or cancellation; the connection's
  /// transport error (wc_category()) if it failed.
  ///
  /// Cancellation (any type) withdraws a read that is waiting for bytes; no byte is
  /// lost: bytes that arrive later go to the next read.
  template <typename MutableBufferSequence, typename CompletionToken = boost::asio::deferred_t>
    requires boost::asio::is_mutable_buffer_sequence<MutableBufferSequence>::value
  auto async_read_some(const MutableBufferSequence& buffers, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
        detail::initiate_stream_read(impl_.get(), ex_), token,
        detail::capture_buffers<boost::asio::mutable_buffer>(buffers));
  }

  /// Writes some of `buffers` (AsyncWriteStream's write_some): as many bytes of its first
  /// 16 buffers as the send buffer and the peer's ring have room for.
  ///
  /// Completion signature: void(error_code, std::size_t bytes_written). Completes as soon
  /// as the bytes are copied into the stream's send buffer (as a socket's write completes
  /// once the kernel has them), which is at once when there is room; otherwise the write
  /// waits until the peer's reader makes room. They are on their way then: a failure
  /// later is reported by the next operation. A write of nothing completes at once with
  /// 0. Errors: asio::error::shut_down after async_shutdown; asio::error::not_connected;
  /// asio::error::operation_aborted (closed, or cancelled); asio::error::connection_reset
  /// once the peer has gone; the connection's transport error; errc::protocol_error if
  /// the peer broke the stream's protocol.
  ///
  /// Cancellation (any type) withdraws a write that waits for room; nothing of it has
  /// been taken then.
  template <typename ConstBufferSequence, typename CompletionToken = boost::asio::deferred_t>
    requires boost::asio::is_const_buffer_sequence<ConstBufferSequence>::value
  auto async_write_some(const ConstBufferSequence& buffers, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code, std::size_t)>(
        detail::initiate_stream_write(impl_.get(), ex_), token,
        detail::capture_buffers<boost::asio::const_buffer>(buffers));
  }

  /// Ends this side's data (as shutdown(send) on a socket): after every byte written
  /// before it, the peer's reads complete with asio::error::eof. This side can still
  /// read. Writes after it fail with asio::error::shut_down; a second shutdown completes
  /// at once. Completion signature: void(error_code), when the peer's transport has the
  /// end. Errors as for async_write_some. Cancellation (any type) is honoured while the
  /// end waits for earlier bytes to be on their way (writing may then go on).
  ///
  /// With stream_transfer::shared the end also waits until the peer has read the bytes
  /// left for it to pull: once the shutdown completes, close() loses nothing.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_shutdown(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(error_code)>(
        detail::initiate_stream_shutdown(impl_.get(), ex_), token);
  }

  /// Closes the stream and its connection at once (connection::close()): pending
  /// operations complete with asio::error::operation_aborted, the peer's reads with eof
  /// (or its transport error). Unlike async_shutdown, bytes in flight may be lost.
  void close() noexcept;

  /// Boost.Beast's way to close the lowest layer of a stream (beast::close_socket,
  /// found by argument-dependent lookup): close().
  friend void beast_close_socket(stream& s) noexcept { s.close(); }

private:
  friend std::size_t
  detail::stream_write_now(stream&, const detail::buffer_view<boost::asio::const_buffer>&);

  std::shared_ptr<detail::stream_impl> impl_;
  executor_type ex_;
};

namespace detail {

/// async_connect_stream's and acceptor::async_accept_stream's handler as the connection's
/// operation completes: called with the connection, it hands on a stream made of it. Its
/// executor, allocator and cancellation slot are the handler's own (the associator below).
template <typename Handler> struct stream_of_connection {
  Handler handler;
  stream_options options;
  void operator()(error_code ec, connection c) && {
    stream s;
    if (!ec) {
      try {
        s = stream(std::move(c), options, ec);
      } catch (const std::bad_alloc&) {
        ec = make_error_code(std::errc::not_enough_memory);
      }
    }
    std::move(handler)(ec, std::move(s));
  }
};

/// async_connect_stream: async_connect, its handler adapted.
class initiate_connect_stream : public io_initiation<no_object, executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, std::string host, std::uint16_t port,
                  const connection_options& options, const stream_options& stream) const {
    async_connect(io(), std::move(host), port, options,
                  stream_of_connection<std::decay_t<Handler>>{std::forward<Handler>(handler),
                                                              stream});
  }
};

/// acceptor::async_accept_stream: the acceptor's async_accept, its handler adapted.
class initiate_accept_stream : public io_initiation<acceptor*, executor_held::by_value> {
public:
  using io_initiation::io_initiation;
  template <typename Handler>
  void operator()(Handler&& handler, const stream_options& stream) const {
    impl_->async_accept(
        stream_of_connection<std::decay_t<Handler>>{std::forward<Handler>(handler), stream});
  }
};

} // namespace detail

/// Connects to a stream listener (an acceptor whose connections become streams through
/// acceptor::async_accept_stream) at `host`:`port`, as async_connect does, and makes the
/// connection a stream with `stream_opts`. Completion signature: void(error_code,
/// stream). Errors, timeouts and cancellation: those of async_connect, and the stream
/// constructor's (errc::invalid_option, a registration failure).
template <typename CompletionToken = boost::asio::deferred_t>
auto async_connect_stream(const boost::asio::any_io_executor& ex, std::string host,
                          std::uint16_t port, const connection_options& options,
                          const stream_options& stream_opts, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, stream)>(
      detail::initiate_connect_stream(ex), token, std::move(host), port, options, stream_opts);
}

/// As above with the default stream_options.
template <typename CompletionToken = boost::asio::deferred_t>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, stream_options>)
auto async_connect_stream(const boost::asio::any_io_executor& ex, std::string host,
                          std::uint16_t port, const connection_options& options,
                          CompletionToken&& token = {}) {
  return async_connect_stream(ex, std::move(host), port, options, stream_options(),
                              std::forward<CompletionToken>(token));
}

/// As above with stream_connection_options() and the default stream_options.
template <typename CompletionToken = boost::asio::deferred_t>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, connection_options>)
auto async_connect_stream(const boost::asio::any_io_executor& ex, std::string host,
                          std::uint16_t port, CompletionToken&& token = {}) {
  return async_connect_stream(ex, std::move(host), port, stream_connection_options(),
                              stream_options(), std::forward<CompletionToken>(token));
}

// acceptor::async_accept_stream, declared with the acceptor.
template <typename CompletionToken>
auto acceptor::async_accept_stream(const stream_options& stream_opts, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(error_code, stream)>(
      detail::initiate_accept_stream(this, get_executor()), token, stream_opts);
}

template <typename CompletionToken>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, stream_options>)
auto acceptor::async_accept_stream(CompletionToken&& token) {
  return async_accept_stream(stream_options(), std::forward<CompletionToken>(token));
}

} // namespace asio_rdma

/// \cond INTERNAL
// stream_of_connection keeps the handler's executor, allocator and cancellation slot.
template <template <typename, typename> class Associator, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator, asio_rdma::detail::stream_of_connection<Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type
  get(const asio_rdma::detail::stream_of_connection<Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const asio_rdma::detail::stream_of_connection<Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};
/// \endcond
