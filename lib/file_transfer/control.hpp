// Sending and receiving the control messages of a file transfer over a
// connection, with the watchdog bounding each receive.
#pragma once

#include "deadline.hpp"
#include "protocol.hpp"

#include <asio_rdma/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <span>

namespace asio_rdma::detail {

/// Encodes `m` into `scratch` and sends it.
inline boost::asio::awaitable<error_code>
send_control(connection& conn, const file_protocol::message& m, std::span<std::byte> scratch) {
  std::size_t n = file_protocol::encode(m, scratch);
  if (n == 0)
    co_return error_code(errc::protocol_error);
  auto [ec, sent] = co_await conn.async_send(boost::asio::buffer(scratch.data(), n),
                                             boost::asio::as_tuple(boost::asio::use_awaitable));
  (void)sent;
  co_return ec;
}

/// The error to report for a failed wait: timed_out if the watchdog closed
/// the connection, a protocol error for a message too large, else `ec`.
inline error_code wait_error(error_code ec, const deadline& d) noexcept {
  if (d.expired())
    return boost::asio::error::timed_out;
  if (ec == errc::buffer_too_small)
    return errc::protocol_error;
  return ec;
}

} // namespace asio_rdma::detail
