// One connection of an rpc::server: reads requests and cancels, runs each call's handler
// on one of its worker coroutines (cancelled through that worker's signal), writes the
// replies in the order they are ready (frame_writer), and holds back reading while it has
// no room for another call (server_options' limits): a client cannot make the server hold
// more than max_calls_per_connection requests and replies of its own.
//
// Over RDMA (bulk_transfer.hpp), a bulk request is RDMA-read from the client's memory
// before its handler runs, and a reply of at least bulk_threshold bytes is registered for
// the client to read: its call lives, and counts against the limits, until the client's
// release frame says it has read it.
#pragma once

#include "rpc/bulk_transfer.hpp"
#include "rpc/call_deadlines.hpp"
#include "rpc/reply_sink.hpp"
#include "rpc/request_source.hpp"
#include "rpc/frame_reader.hpp"
#include "rpc/frame_writer.hpp"
#include "rpc/server_impl.hpp"
#include "rpc/transport.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <vector>

namespace asio_rdma::rpc::detail {

class server_connection : public std::enable_shared_from_this<server_connection> {
public:
  server_connection(std::shared_ptr<server_impl> server, std::unique_ptr<transport> t);

  /// Reads the client's hello, answers it, then serves.
  void start();
  /// Closes the transport; calls running are cancelled and their replies dropped.
  void close();
  /// As close(), but the replies written reach the client first: the transport is shut
  /// down gracefully (once the write in progress, if any, is done), then closed.
  void close_gracefully();
  /// There may be room for the call that waits (server_impl's max_calls).
  void resume();
  /// Cancels every call running (the server's drain ran out of grace).
  void cancel_calls();

private:
  struct call;
  // A coroutine that runs handlers, one call after another (work()), kept for the
  // connection's life: a call costs no co_spawn (a new coroutine, a post to start it, one
  // to end it, two executor work guards) but a resumption. As many exist as handlers
  // have run at once.
  struct worker {
    using wake_handler =
        boost::asio::async_result<boost::asio::use_awaitable_t<>, void()>::handler_type;
    std::optional<wake_handler> waiting; // set while idle: resumed with the next call
    call* assigned = nullptr;            // the call it is resumed for (none: it ends)
    boost::asio::awaitable<std::vector<std::byte>> handler; // that call's handler
    // Bound to the coroutine: cancels the handler it runs. Shared with the coroutine's
    // completion: the coroutine's cancellation state lives in it until the coroutine is
    // over, which may be after the connection (and this) is gone.
    std::shared_ptr<boost::asio::cancellation_signal> signal =
        std::make_shared<boost::asio::cancellation_signal>();
  };

  // A call, from its request to its reply's write. Calls are reused (idle_calls_): a
  // request costs no allocation of its state or (up to kept_request_bytes) its bytes.
  struct call {
    call(const boost::asio::any_io_executor& ex, asio_rdma::connection* rdma)
        : source(ex), sink(ex),
          context({}, {}, bulk_request(&source, ex), bulk_reply(&sink, ex), rdma) {}
    /// As new, for the request `id` of `m` (nullptr: an unknown method).
    void reset(std::uint64_t id, const method_entry* m,
               std::chrono::steady_clock::time_point deadline);

    std::uint64_t id = 0;
    const method_entry* method = nullptr;
    std::vector<std::byte> request, response;
    request_source source; // the request for context.request_bulk()
    reply_sink sink;       // the reply for context.reply_bulk()
    call_context context;
    errc cancel_reason = errc::cancelled;
    worker* runner = nullptr; // the worker running its handler
    outgoing_frame frame;
    bool running = false;
    bool bulk = false;             // its request is a bulk one: `descriptor`, then pulled
    bool pulling = false;          // its request waits to be RDMA-read, or is being read
    bool cancel_requested = false; // a cancel came while it was
    bool awaiting_release = false; // its bulk reply is written; the client reads it
    bool has_reply_buffer = false; // its request ends with the caller's reply buffer
    bool payload_taken = false;    // request_done() has taken the request's payload apart
    std::uint32_t outcome = 0;     // the handler's, while its writes drain
    std::string outcome_message;
    descriptor_bytes descriptor{};
    std::unique_ptr<bulk_buffer> pulled;      // a bulk request's bytes (the first
    std::size_t pulled_length = 0;            // pulled_length of it)
    remote_buffer pull_from;                  // where it is read from, and the next
    call* next_pull = nullptr;                // bulk request waiting to be read after it
    std::optional<exposed_payload> exposed;   // a bulk reply's registration

    std::span<const std::byte> request_bytes() const noexcept {
      if (pulled)
        return pulled->bytes(pulled_length);
      return request;
    }
  };
  using owner = pull_owner<server_connection>;

  static void on_hello(void* self, const boost::system::error_code& ec, std::size_t);
  void read_more();
  static void on_read(void* self, const boost::system::error_code& ec, std::size_t n);
  void take_frames();
  bool take_frame();
  bool has_room() const noexcept;
  bool take_request();
  static void on_request(void* self, const boost::system::error_code& ec, std::size_t);
  void request_done(call& c);
  void pull_request(call& c, const remote_buffer& from);
  void start_pulls();
  static void on_pulled(void* owner, const boost::system::error_code& ec, std::size_t);
  bool expose_reply(call& c);
  std::unique_ptr<bulk_buffer> take_spare(std::size_t n, error_code& ec);
  void keep_spare(std::unique_ptr<bulk_buffer> b);
  call* new_call(std::uint64_t id, const method_entry* m,
                 std::chrono::steady_clock::time_point deadline);
  friend class call_deadlines;
  /// Cancels the running calls whose deadline is `now` or earlier; watches the rest's.
  void expire_calls(std::chrono::steady_clock::time_point now);
  void run(call& c);
  /// A worker's coroutine: waits for a call, runs its handler, answers, and again.
  boost::asio::awaitable<void> work(worker& w, std::shared_ptr<server_connection> keep);
  /// The initiation of a worker's wait for its next call: it becomes idle.
  struct idle_wait {
    server_connection* self;
    worker* w;
    void operator()(worker::wake_handler h) const;
  };
  /// The handler of `c` returned, or threw `failure`.
  void handler_ended(call& c, std::exception_ptr failure);
  /// `c` is `w`'s next call.
  static void assign(worker& w, call& c,
                     boost::asio::awaitable<std::vector<std::byte>> handler) noexcept;
  /// Resumes the last idle worker: with the call assigned to it, or with none, to end.
  void wake_idle_worker();
  /// Ends the idle workers' coroutines (the connection is closed).
  void end_idle_workers();
  void handler_done(call& c, std::uint32_t status, std::string_view message);
  static void on_drained(void* owner, const boost::system::error_code&, std::size_t);
  void answer(call& c, std::uint32_t status, std::string_view message);
  bool take_payload(call& c);
  void cancel(call& c, errc reason);
  void send(call& c, wire::frame_kind kind, std::uint32_t word);
  /// Answers `c` with an error frame carrying `message` (cut to the longest message).
  void fail_call(call& c, errc status, std::string_view message);
  void drop(call& c);
  /// The call whose reply `f` is (any frame but hello_).
  static call& call_of(outgoing_frame& f) noexcept { return *static_cast<call*>(f.owner); }
  /// Writes the queued frames: at once while the transport has room (write_now), else
  /// through an asynchronous write that ends in on_written.
  void kick();
  static void on_written(void* self, const boost::system::error_code& ec, std::size_t);
  /// The batch being written is out (or failed with `ec`): its calls end, and after the
  /// last frames (a graceful end, a refused hello) the transport. False if writing ends.
  bool batch_written(const boost::system::error_code& ec);
  void fail();
  void shut_down_transport();
  static void on_shut_down(void* self, const boost::system::error_code& ec, std::size_t);

  std::shared_ptr<server_impl> server_;
  std::unique_ptr<transport> transport_;
  frame_writer writer_;
  boost::unordered_flat_map<std::uint64_t, std::unique_ptr<call>> calls_;
  std::vector<std::unique_ptr<call>> idle_calls_; // calls ended, for the next requests
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<worker*> idle_workers_; // those waiting for a call
  call_deadlines deadlines_;
  wire::header_bytes hello_in_{};
  frame_reader reader_;       // the frames read, not yet taken
  wire::frame_header header_; // the frame taken (a request waiting for room keeps it)
  call* reading_ = nullptr;   // the call whose request's rest is being read
  outgoing_frame hello_;
  asio_rdma::connection* rdma_ = nullptr; // the transport's, for bulk payloads
  bool client_pulls_ = false;             // the client's hello offers bulk replies
  std::size_t client_max_reply_ = 0;      // the client's hello's largest reply
  // Buffers bulk requests were read into, kept for the next ones (at most
  // max_spare_bytes in all).
  std::vector<std::unique_ptr<bulk_buffer>> spare_;
  std::size_t spare_bytes_ = 0;
  // Bulk requests waiting to be read, in arrival order (call::next_pull), and the bytes
  // of those being read (start_pulls()).
  call* pulls_head_ = nullptr;
  call* pulls_tail_ = nullptr;
  std::size_t pull_bytes_ = 0;
  bool closed_ = false;
  bool kicking_ = false; // kick() is writing: frames queued meanwhile wait for its loop
  bool paused_ = false;  // a request waits for room: nothing is read meanwhile
  bool close_after_hello_ = false;
  bool transport_closed_ = false;
  bool graceful_ = false; // close_gracefully(): shut down once the writer is idle

  friend class server_impl;
};

} // namespace asio_rdma::rpc::detail
