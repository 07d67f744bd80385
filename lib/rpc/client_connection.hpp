// One connection of an rpc::client: establishing it (connect, then the hello that tells
// the server's limits), the calls in flight on it (call_table), their frames
// (frame_writer), the replies read back, deadlines and cancellation.
//
// A call's handler never runs while its request may still be written or its reply read
// into the caller's memory: an end that comes meanwhile (a cancellation, the deadline, a
// reply racing the write, the connection's failure) is held and delivered when that
// write or read completes. A call ended before its reply
// (cancelled, deadline) that the server has seen is followed by a cancel frame; its slot
// is reused only once no frame of it is queued or written and no reply is being read into
// it, and a reply that comes later finds no call (call_table's generations).
//
// Over RDMA, payloads of at least bulk_threshold bytes go by RDMA read (bulk_transfer.hpp):
// a request's memory stays registered until the server answers (the server may read it
// until then, even after the call ended: it never writes it), and a bulk reply is read
// straight into its destination, then released. On such a connection a call's slot is
// kept until the server has answered it, so a bulk reply always finds its call. A reply
// buffer exposed to the server's writes (call_options::expose_reply_buffer), and a
// request advertised from the caller's own registered memory (call_options::
// request_memory), hold their call's end until the server has answered; a server that has not
// answered within reply_buffer_grace of that end loses the connection, which stops its writes.
#pragma once

#include "rpc/bulk_transfer.hpp"
#include "rpc/call_deadlines.hpp"
#include "rpc/call_completion.hpp"
#include "rpc/call_table.hpp"
#include "rpc/frame_reader.hpp"
#include "rpc/frame_writer.hpp"
#include "rpc/transport.hpp"

#include <asio_rdma/detail/pending_operation.hpp>
#include <asio_rdma/rpc/options.hpp>
#include <asio_rdma/stream.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace asio_rdma::rpc::detail {

class client_connection : public std::enable_shared_from_this<client_connection> {
public:
  /// Told once when the connection fails (or could not be established) and when it is up.
  struct observer {
    virtual void connection_up(client_connection&) = 0;
    virtual void connection_failed(client_connection&, const boost::system::error_code&) = 0;

  protected:
    ~observer() = default;
  };

  client_connection(const boost::asio::any_io_executor& ex, const client_options& options,
                    observer* watcher);

  /// Connects to `ep` and exchanges hellos; calls made meanwhile wait in the queue.
  void establish(const endpoint& ep);
  /// Exchanges hellos over an established stream or socket, then serves calls over it.
  void establish(asio_rdma::stream s);
  void establish(boost::asio::ip::tcp::socket s);
  /// Takes `t`, a transport whose hello exchange is done (the server's largest request:
  /// `server_max_request`), as establish() would: for fuzzers and tests that drive a
  /// connection over their own transport.
  void adopt(std::unique_ptr<transport> t, std::size_t server_max_request);
  /// Starts a call: its reply, an error, its deadline or cancellation completes `op`.
  void call(std::uint32_t method, boost::asio::const_buffer request,
            std::chrono::milliseconds deadline, call_completion&& op);
  /// Fails every call with `why` and closes the transport. The observer is not told.
  void close(const boost::system::error_code& why, asio_rdma::detail::from origin);
  /// The observer is gone: tell it nothing more.
  void detach() noexcept { watcher_ = nullptr; }

  bool up() const noexcept { return up_; }
  /// The RDMA connection under the stream while it is up; nullptr over TCP.
  asio_rdma::connection* rdma() const noexcept { return up_ ? rdma_ : nullptr; }
  bool failed() const noexcept { return failed_.failed(); }
  std::size_t calls_in_flight() const noexcept { return calls_.in_use(); }

private:
  struct call_slot {
    explicit call_slot(const boost::asio::any_io_executor& ex) : timer(ex) {}
    std::uint32_t generation = 1;
    bool in_use = false;
    std::uint64_t id = 0;
    outgoing_frame frame;
    call_completion op;               // empty once the call's handler has run
    std::vector<std::byte> response;  // the reply's bytes (not in the caller's buffer), or
                                      // an error's message
    std::size_t reply_length = 0;
    call_deadlines::clock::time_point deadline;
    boost::asio::steady_timer timer;  // the server's grace for an exposed reply buffer
    bool waiting_grace = false;       // a wait of `timer` may be pending
    bool request_out = false;         // the request is written
    bool answered = false;            // a reply or error frame came for it
    bool reading = false;             // that frame's payload is being read into `response`
    std::optional<boost::system::error_code> held; // an end waiting for the request's write
    bool held_with_response = false;
    boost::asio::const_buffer request;            // the caller's request bytes
    std::optional<exposed_payload> exposed;       // a bulk request's memory
    std::optional<exposed_payload> reply_exposed; // the caller's reply buffer, writable
    descriptor_bytes bulk_reply{};                // a bulk reply's descriptor, as read
    bool release_pending = false; // a release frame waits for the frame being written
  };
  using owner = pull_owner<client_connection>;
  /// The slot whose frame `f` is (call() makes it the frame's owner).
  static call_slot& slot_of(outgoing_frame& f) noexcept {
    return *static_cast<call_slot*>(f.owner);
  }

  void start(boost::asio::awaitable<void> how);
  boost::asio::awaitable<void> connect_and_hello(endpoint ep);
  template <typename Stream> boost::asio::awaitable<void> hello_and_take(Stream s);
  template <typename Stream> boost::asio::awaitable<void> hello(Stream& s);
  void established();

  friend class call_deadlines;
  /// Ends the calls whose deadline is `now` or earlier; watches the deadlines of the rest.
  void expire_calls(call_deadlines::clock::time_point now);
  void end_call(std::uint64_t id, const boost::system::error_code& ec,
                asio_rdma::detail::from origin);
  void finish(call_slot& c, const boost::system::error_code& ec, bool with_response,
              asio_rdma::detail::from origin);
  void deliver(call_slot& c, const boost::system::error_code& ec, bool with_response,
               asio_rdma::detail::from origin);
  void deliver_held(call_slot& c,
                    asio_rdma::detail::from origin = asio_rdma::detail::from::completion_path);
  void send_cancel(call_slot& c);
  void maybe_release(call_slot& c);
  void fail(const boost::system::error_code& ec, asio_rdma::detail::from origin);

  /// Writes the queued frames: at once while the transport has room (write_now), else
  /// through an asynchronous write that ends in on_written.
  void kick();
  static void on_written(void* self, const boost::system::error_code& ec, std::size_t);
  /// The batch being written is out (or failed with `ec`).
  void batch_written(const boost::system::error_code& ec, asio_rdma::detail::from origin);
  void read_more();
  static void on_read(void* self, const boost::system::error_code& ec, std::size_t n);
  void take_frames();
  bool take_frame();
  static void on_payload(void* self, const boost::system::error_code& ec, std::size_t);
  bool read_payload(call_slot& c, std::span<std::byte> into);
  void payload_done(call_slot& c);
  bool wants_bulk(std::size_t bytes) const noexcept;
  boost::system::error_code expose(call_slot& c);
  void shape_request(call_slot& c);
  bool server_may_access(const call_slot& c) const noexcept;
  void hold_for_server(call_slot& c);
  void pull_reply(call_slot& c);
  static void on_pulled(void* owner, const boost::system::error_code& ec, std::size_t);
  void send_release(call_slot& c);
  void transport_failed(const boost::system::error_code& ec);

  boost::asio::any_io_executor ex_;
  client_options options_;
  observer* watcher_;
  std::unique_ptr<transport> transport_;
  boost::asio::cancellation_signal connect_cancel_;
  boost::asio::steady_timer connect_timer_;
  bool up_ = false;
  bool kicking_ = false; // kick() is writing: frames queued meanwhile wait for its loop
  boost::system::error_code failed_;
  std::size_t server_max_request_ = 0;
  asio_rdma::connection* rdma_ = nullptr; // the transport's, for bulk payloads
  bool server_pulls_ = false;             // the server's hello offers bulk requests
  call_table<call_slot> calls_;
  call_deadlines deadlines_;
  frame_writer writer_;
  // Reading: the frames buffered, the header of the frame taken, the call whose payload's
  // rest is being read, the bytes of a frame nobody waits for still to drop.
  frame_reader reader_;
  wire::frame_header header_;
  std::uint64_t reading_id_ = 0;
  std::size_t discard_left_ = 0;
};

} // namespace asio_rdma::rpc::detail
