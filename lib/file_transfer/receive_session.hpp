// One connection of a file_receiver: answers the handshake with registered
// slots, checks names, writes chunks to NAME.part, verifies and commits.
#pragma once

#include "deadline.hpp"
#include "receiver_impl.hpp"

#include <asio_rdma/detail/file_protocol.hpp>

#include <boost/asio/awaitable.hpp>

#include <array>
#include <vector>

namespace asio_rdma::detail {

class receive_session {
public:
  /// `over_limit`: the peer has too many connections; this one is refused
  /// at its hello.
  receive_session(file_receiver_impl& impl, connection& conn, receive_result& result,
                  bool over_limit);
  /// Releases the peer's file-in-flight count if a file is open.
  ~receive_session();
  receive_session(const receive_session&) = delete;
  receive_session& operator=(const receive_session&) = delete;

  /// Runs until the sender disconnects between files (success) or an error.
  boost::asio::awaitable<error_code> run();

private:
  /// Small credit messages in flight, each in its own buffer until its send
  /// completed; shared with the send handlers, which may outlive the session.
  struct credit_ring {
    explicit credit_ring(const boost::asio::any_io_executor& ex);
    std::vector<std::array<std::byte, 16>> buffers;
    std::vector<unsigned char> busy;
    boost::asio::steady_timer signal;
    error_code error;
  };

  boost::asio::awaitable<error_code> on_hello(const file_protocol::hello& m);
  /// Challenge-response on the shared secret: success only for a valid proof.
  boost::asio::awaitable<error_code> authenticate();
  boost::asio::awaitable<error_code> on_begin(const file_protocol::file_begin& m);
  boost::asio::awaitable<error_code> on_chunk(const received_message& m);
  boost::asio::awaitable<error_code> on_end(const file_protocol::file_end& m);
  boost::asio::awaitable<error_code> reply(std::uint32_t file_id, file_protocol::status_code code);
  /// Replies with `code` and returns `ec` (the session's error).
  boost::asio::awaitable<error_code> refuse(std::uint32_t file_id, file_protocol::status_code code,
                                            error_code ec);
  /// refuse() for a failed write or commit: no_space for ENOSPC/EDQUOT,
  /// file_exists, io_error otherwise.
  boost::asio::awaitable<error_code> refuse_write(std::uint32_t file_id, error_code ec);
  boost::asio::awaitable<error_code> send_credit(std::uint32_t sequence);
  void completed(received_file f);
  /// Ends the current file's count against max_files_in_flight_per_peer.
  void release_file_slot() noexcept;

  file_receiver_impl& impl_;
  connection& conn_;
  receive_result& result_;
  deadline deadline_;
  /// The receiver's buffer size when this connection was accepted:
  /// set_buffer_size() applies to later connections only.
  std::size_t buffer_size_;
  std::shared_ptr<credit_ring> credits_;
  memory_region slots_;
  file_protocol::hello_ack ack_;
  std::size_t credit_next_ = 0;
  bool authenticated_ = false;
  bool over_limit_ = false;
  /// The current file counts against the peer's files in flight.
  bool file_slot_ = false;

  // The file being received.
  partial_file file_;
  std::string name_;
  std::uint32_t file_id_ = 0;
  std::uint32_t mode_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t received_ = 0;
  std::uint32_t next_sequence_ = 0;
  std::uint32_t crc_ = 0;

  std::array<std::byte, file_protocol::max_message_size> in_{};
  std::array<std::byte, 64> out_{};
};

} // namespace asio_rdma::detail
