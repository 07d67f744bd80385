// asio_rdma::stream's state: the connection it owns, the ring the peer writes into, the
// send buffer its own writes are copied into, the protocol's bookkeeping
// (stream_window.hpp), and the one pending read, write and shutdown.
#pragma once

#include "stream/handler_memory.hpp"
#include "stream/stream_window.hpp"
#include "stream/stream_wire.hpp"

#include <asio_rdma/connection.hpp>
#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/stream.hpp>

#include <array>
#include <cstddef>
#include <memory>

namespace asio_rdma::detail {

class stream_impl : public std::enable_shared_from_this<stream_impl> {
public:
  stream_impl(connection&& established, const stream_options& options);
  ~stream_impl();

  /// Registers the ring and the send buffer, sends the advertisement and starts
  /// receiving the peer's messages. Once, right after construction.
  void open(error_code& ec);

  const connection& conn() const noexcept { return conn_; }
  connection& conn() noexcept { return conn_; }
  const boost::asio::any_io_executor& io() const noexcept { return io_; }
  void close() noexcept;

  void read(const buffer_view<boost::asio::mutable_buffer>& buffers,
            pending_operation<void(error_code, std::size_t)>&& op);
  void write(const buffer_view<boost::asio::const_buffer>& buffers,
             pending_operation<void(error_code, std::size_t)>&& op);
  /// Takes at once as many of the first bytes of `buffers` (any number of them) as there
  /// is room for, if a write could start now (none waits, no end, no error); returns how
  /// many. No handler: for the library's own writers (the RPC transport), which then
  /// write the rest, and learn of an error, through write().
  std::size_t write_now(const buffer_view<boost::asio::const_buffer>& buffers);
  void shutdown(pending_operation<void(error_code)>&& op);

private:
  struct sent;
  struct read_canceller;
  struct write_canceller;
  struct shutdown_canceller;
  /// What to do when a send or RDMA write of the stream's completes: (error, the data
  /// length it carried).
  using sent_action = void (stream_impl::*)(error_code, std::uint32_t);
  using handler_memory = handler_block<160>;

  /// At most this many posts of data in flight (RDMA writes, or bytes left for the peer
  /// to pull), each at most post_size_ bytes (a quarter of the send buffer, so that they
  /// overlap); bytes written meanwhile are coalesced into the next ones.
  static constexpr std::size_t max_posts = stream_writer_window::max_in_flight;
  static_assert(max_posts == stream_wire::max_pulls);
  /// The smallest post left for the peer to pull: below it the pull's two messages cost
  /// more than the work it moves to the peer's CPU (1 KiB writes, coalesced into posts
  /// of 4 KiB and more, were 0.89x as fast with pulls from 4 KiB, 0.96x from 16 KiB:
  /// bench/RESULTS.md, "Who moves the bytes").
  static constexpr std::size_t min_pull = 16 * 1024;

  // Receiving the peer's messages: the connection hands each to the stream as it arrives
  // (connection_impl::listen), then its end.
  static void message_arrived(void* self, error_code ec, const received_message& message);
  void on_received(error_code ec, const received_message& message);
  /// Acts on one message; false if it breaks the protocol.
  bool handle(const received_message& message);
  bool take_advertisement(const stream_wire::advertisement& ad);
  void send_advertisement();

  // Reading.
  void wake_reader();
  void complete_read(from origin);
  std::size_t copy_out(const buffer_view<boost::asio::mutable_buffer>& buffers) noexcept;
  void return_credit();
  void credit_sent(error_code ec, std::uint32_t);
  /// Reads bytes the peer left for this side (the `n` it offered last) into the ring.
  void post_pull(std::size_t n);
  void pull_landed(error_code ec, std::uint32_t length);
  /// After the peer's end: eof for reads, once no pull is in flight.
  void end_reading_once_landed();

  // Writing.
  std::size_t copy_in(const buffer_view<boost::asio::const_buffer>& buffers) noexcept;
  /// Posts what has been copied and not posted (up to max_posts in flight), then the end
  /// of data once everything before it is posted.
  void flush();
  void post_data(const stream_writer_window::post& p, bool pull);
  void data_posted(error_code ec, std::uint32_t length);
  void write_posted(error_code ec, std::uint32_t);
  void wake_writer();
  void end_sent(error_code ec, std::uint32_t);

  /// Sends a control word (immediate data, or a 4-byte body kept in `body`).
  void send_word(std::uint32_t word, std::array<std::byte, stream_wire::word_size>& body,
                 handler_memory& memory, sent_action then, std::uint32_t length = 0);
  size_operation completion(handler_memory& memory, sent_action then, std::uint32_t length = 0);

  /// The stream failed (transport error, protocol error, close): pending operations
  /// complete with `ec`, later ones too once the bytes already here are read.
  void fail(error_code ec, from origin);

  // Completing a read or write inside the call that started it.
  using size_op = pending_operation<void(error_code, std::size_t)>;
  /// Completes `op`, which took `n` bytes inside the user's call that started it: posted,
  /// or, when a handler of the connection's own completion batch made the call (a
  /// ping-pong's next write, started by the read that got the reply), or a handler run
  /// at its end, kept in `done` until that batch's end (batch_ended), with no task of
  /// its own. A busy-polling queue then does not yield its turn (a reactor pass) for it.
  void complete_call(size_op& op, size_op& done, std::size_t& done_bytes, std::size_t n);
  /// The connection's batch end (connection_impl::on_batch_end): runs the done handlers.
  static void batch_ended(void* self);
  /// Completes the reads and writes done, taking each from its slot: run now from the
  /// batch's end (from::completion_path; a handler may leave another done), or posted
  /// (from::user_call: the stream failed meanwhile).
  void complete_done(from origin);

  connection conn_;
  /// conn_'s implementation, held here too: the batch-end listener the destructor removes
  /// is on it even if conn_ was moved from (underlying_connection() says not to).
  std::shared_ptr<connection_impl> conn_impl_;
  boost::asio::any_io_executor io_;
  /// The device carries immediate data (not iWARP): notifications ride in it.
  bool immediate_ = false;
  /// This side leaves some of its bytes for the peer to pull (stream_transfer::shared,
  /// or automatic on SoftRoCE), and the peer knows how (its advertisement is version 2).
  bool share_ = false;
  bool peer_pulls_ = false;
  /// The last post was left to be pulled: the next one is written (they alternate).
  bool last_pulled_ = false;

  // The peer writes into ring_; this side's writes are copied into send_buffer_.
  memory_region ring_;
  memory_region send_buffer_;
  std::uint32_t send_lkey_ = 0; // send_buffer_'s (lkey() is out of line), read per post
  stream_reader_window in_;
  stream_writer_window out_;
  stream_wire::advertisement peer_{};

  /// Reads get this once the ring is empty: eof after the peer's end or disconnect, or
  /// the stream's failure.
  error_code read_end_;
  /// Writes (and shutdown) get this: the stream's failure, or connection_reset once the
  /// peer has gone.
  error_code write_end_;
  bool end_received_ = false;

  // The peer's control messages are copied here as they arrive (a body of any length
  // the protocol sends).
  alignas(8) std::array<std::byte, stream_wire::advertisement_size> control_{};

  // The pending read.
  pending_operation<void(error_code, std::size_t)> read_op_;
  buffer_array<boost::asio::mutable_buffer> read_buffers_;

  // A read and a write that completed inside the connection's completion batch, with
  // their byte counts, until its end (complete_call). Their handlers have not run: for
  // the user they are still in flight.
  size_op read_done_, write_done_;
  std::size_t read_done_bytes_ = 0, write_done_bytes_ = 0;
  bool running_done_ = false; // batch_ended runs their handlers

  // The pending write (waiting for room) and the RDMA writes in flight.
  pending_operation<void(error_code, std::size_t)> write_op_;
  buffer_array<boost::asio::const_buffer> write_buffers_;
  std::size_t post_size_;
  std::array<handler_memory, 2 * max_posts> post_memory_; // a write and, on iWARP, its send
  std::size_t posts_started_ = 0;
  std::array<std::array<std::byte, stream_wire::word_size>, max_posts> data_bodies_{};

  // The pulls in flight (they land in order), each followed by its `pulled`.
  std::array<handler_memory, 2 * max_posts> pull_memory_;
  std::array<std::array<std::byte, stream_wire::word_size>, max_posts> pulled_bodies_{};
  std::size_t pulls_started_ = 0;

  // Control messages: the advertisement, credit (one in flight), the end of data.
  std::array<std::byte, stream_wire::advertisement_size> advertisement_body_{};
  handler_memory advertisement_memory_;
  bool advertise_later_ = false; // on receiving the peer's (an iWARP acceptor)
  bool credit_in_flight_ = false;
  std::array<std::byte, stream_wire::word_size> credit_body_{};
  handler_memory credit_memory_;
  /// async_shutdown asked for the end; it is sent once every byte before it is posted.
  bool end_wanted_ = false;
  bool end_posted_ = false;
  std::array<std::byte, stream_wire::word_size> end_body_{};
  handler_memory end_memory_;
  pending_operation<void(error_code)> shutdown_op_;
};

} // namespace asio_rdma::detail
