// One connection of an rpc::server: reads requests and cancels, runs each call's handler
// as its own coroutine (cancelled through its own signal), writes the replies in the order
// they are ready (frame_writer), and holds back reading while it has no room for another
// call (server_options' limits): a client cannot make the server hold more than
// max_calls_per_connection requests and replies of its own.
#pragma once

#include "rpc/frame_reader.hpp"
#include "rpc/frame_writer.hpp"
#include "rpc/server_impl.hpp"
#include "rpc/transport.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <memory>
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
  struct call {
    call(const boost::asio::any_io_executor& ex, std::string_view method,
         std::chrono::steady_clock::time_point deadline)
        : context(method, deadline), timer(ex) {}
    std::uint64_t id = 0;
    const method_entry* method = nullptr;
    std::vector<std::byte> request, response;
    call_context context;
    errc cancel_reason = errc::cancelled;
    // Shared with the handler's completion, which the coroutine's slot is bound to.
    std::shared_ptr<boost::asio::cancellation_signal> signal =
        std::make_shared<boost::asio::cancellation_signal>();
    boost::asio::steady_timer timer; // the deadline
    outgoing_frame frame;
    bool running = false;
  };

  static void on_hello(void* self, const boost::system::error_code& ec, std::size_t);
  void read_more();
  static void on_read(void* self, const boost::system::error_code& ec, std::size_t n);
  void take_frames();
  bool take_frame();
  bool has_room() const noexcept;
  bool take_request();
  static void on_request(void* self, const boost::system::error_code& ec, std::size_t);
  void request_done(call& c);
  void run(call& c);
  void handler_done(call& c, std::uint32_t status, std::string_view message);
  void cancel(call& c, errc reason);
  void send(call& c, wire::frame_kind kind, std::uint32_t word);
  void drop(call& c);
  void kick();
  static void on_written(void* self, const boost::system::error_code& ec, std::size_t);
  void fail();
  void shut_down_transport();
  static void on_shut_down(void* self, const boost::system::error_code& ec, std::size_t);

  std::shared_ptr<server_impl> server_;
  std::unique_ptr<transport> transport_;
  frame_writer writer_;
  boost::unordered_flat_map<std::uint64_t, std::unique_ptr<call>> calls_;
  wire::header_bytes hello_in_{};
  frame_reader reader_;       // the frames read, not yet taken
  wire::frame_header header_; // the frame taken (a request waiting for room keeps it)
  call* reading_ = nullptr;   // the call whose request's rest is being read
  outgoing_frame hello_;
  bool closed_ = false;
  bool paused_ = false;  // a request waits for room: nothing is read meanwhile
  bool close_after_hello_ = false;
  bool transport_closed_ = false;
  bool graceful_ = false; // close_gracefully(): shut down once the writer is idle

  friend class server_impl;
};

} // namespace asio_rdma::rpc::detail
