// Where a call's reply goes when its handler writes it through call_context::reply_bulk():
// straight into the caller's buffer by RDMA write (bulk_transfer.hpp's push), when the
// caller exposed it, or into the server's memory, to travel as any reply. The writes to
// the caller's buffer in flight are counted: the call is answered only once they have
// all completed, so none lands after the caller has its buffer back.
#pragma once

#include "rpc/transport.hpp"

#include <asio_rdma/connection.hpp>
#include <asio_rdma/remote_buffer.hpp>
#include <asio_rdma/rpc/server.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace asio_rdma::rpc::detail {

class reply_sink {
public:
  explicit reply_sink(const boost::asio::any_io_executor& ex) : ex_(ex) {}

  /// As new, for another call (no write in flight); the memory of bytes() is kept.
  void reset() noexcept {
    room_ = 0;
    remote_.reset();
    conn_ = nullptr;
    bytes_.clear();
    length_ = 0;
    in_flight_ = 0;
    used_ = false;
    drained_ = {};
  }
  /// Writes collect in memory, up to `room` bytes.
  void in_memory(std::size_t room) noexcept {
    room_ = room;
    remote_.reset();
  }
  /// Writes go into the caller's `where`, over `conn`.
  void to_peer(asio_rdma::connection& conn, const remote_buffer& where) noexcept {
    conn_ = &conn;
    remote_ = where;
    room_ = static_cast<std::size_t>(where.length);
  }

  std::size_t room() const noexcept { return room_; }
  /// A write was made (the reply is what was written).
  bool used() const noexcept { return used_; }
  bool into_peer() const noexcept { return remote_.has_value(); }
  /// The end of the furthest write.
  std::size_t length() const noexcept { return length_; }
  /// What was written, in memory (when !into_peer()).
  std::vector<std::byte>& bytes() noexcept { return bytes_; }
  /// Writes into the caller's buffer not yet complete.
  std::size_t in_flight() const noexcept { return in_flight_; }
  /// Calls `done` once no write is in flight (at once, posted, if none is).
  void when_drained(io_done done);

  /// Writes `bytes`, into the caller's buffer from memory the handler registered
  /// (`holding`, or null: `bytes` are registered for the write).
  void write(std::size_t offset, boost::asio::const_buffer bytes, const memory_region* holding,
             asio_rdma::detail::pending_operation<void(error_code, std::size_t)>&& op);

private:
  struct piece_write;
  void piece_done();

  boost::asio::any_io_executor ex_;
  std::size_t room_ = 0;
  std::optional<remote_buffer> remote_;
  asio_rdma::connection* conn_ = nullptr;
  std::vector<std::byte> bytes_;
  std::size_t length_ = 0;
  std::size_t in_flight_ = 0;
  bool used_ = false;
  io_done drained_{};
};

} // namespace asio_rdma::rpc::detail
