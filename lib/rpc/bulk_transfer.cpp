#include "rpc/bulk_transfer.hpp"

#include "error_message.hpp"

#include <infiniband/verbs.h> // ibv_mr: a region's protection domain

#include <asio_rdma/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace asio_rdma::rpc::detail {

namespace {
/// The longest RDMA read posted at once: within every device's message size (rxe and siw
/// take 2 GiB), and short enough that a pull overlaps its pieces.
constexpr std::size_t piece = std::size_t(4) << 20;

/// One pull or push: the local memory's registration (if it made it) and the pieces still in
/// flight.
struct transfer_state {
  memory_region region;
  io_done done;
  std::size_t pieces_left = 0;
  std::size_t bytes = 0;
  error_code first_error;
};

/// Posts the reads (or writes, `push`) of `state->bytes` between the local `mine` and the
/// peer's `theirs`, in pieces.
void transfer_pieces(connection& conn, const std::shared_ptr<transfer_state>& state,
                     const local_buffer& mine, const remote_buffer& theirs, bool push) {
  const std::size_t n = state->bytes;
  state->pieces_left = (n + piece - 1) / piece;
  for (std::size_t offset = 0; offset < n; offset += piece) {
    const std::size_t len = std::min(piece, n - offset);
    local_buffer part = mine;
    part.data += offset;
    part.length = static_cast<std::uint32_t>(len);
    auto piece_done = [state](const error_code& e, std::size_t) {
      if (e && !state->first_error)
        state->first_error = e;
      if (--state->pieces_left == 0)
        state->done.fn(state->done.owner.get(), state->first_error,
                       state->first_error ? 0 : state->bytes);
    };
    if (push)
      conn.async_write(part, theirs.slice(offset, len), std::move(piece_done));
    else
      conn.async_read(part, theirs.slice(offset, len), std::move(piece_done));
  }
}
/// `bytes` as registration takes them. const_cast: registered without local write access
/// (remote read, or the local side of an RDMA write), nothing writes them.
std::span<std::byte> mutable_view(boost::asio::const_buffer bytes) noexcept {
  return {static_cast<std::byte*>(const_cast<void*>(bytes.data())), bytes.size()};
}

/// pull() and push() of memory not registered yet: registers `mine` with `flags` for the
/// transfer's length (the state keeps it), then transfers in pieces; a registration that
/// fails completes `done` with its error, posted.
void transfer_registered(connection& conn, std::span<std::byte> mine, access flags,
                         const remote_buffer& theirs, bool push, io_done done) {
  auto state = std::make_shared<transfer_state>();
  state->done = std::move(done);
  state->bytes = mine.size();
  error_code ec;
  state->region = memory_region(conn, mine, flags, ec);
  if (ec) {
    return boost::asio::post(conn.get_executor(), [state, ec] {
      state->done.fn(state->done.owner.get(), ec, 0);
    });
  }
  transfer_pieces(conn, state, state->region.slice(), theirs, push);
}
} // namespace

bulk_buffer::bulk_buffer(const connection& conn, std::size_t capacity, error_code& ec)
    : region_(conn, capacity, access::local_write | access::remote_write, ec) {}

void pull(connection& conn, const bulk_buffer& into, std::size_t n, const remote_buffer& from,
          io_done done) {
  auto state = std::make_shared<transfer_state>();
  state->done = std::move(done);
  state->bytes = n;
  transfer_pieces(conn, state, into.slice(n), from, false);
}

void push(connection& conn, boost::asio::const_buffer from, const remote_buffer& to,
          io_done done) {
  // Local read only: the device reads `from`, nothing writes it.
  transfer_registered(conn, mutable_view(from), access::none, to, true, std::move(done));
}

exposed_payload::exposed_payload(const connection& conn, boost::asio::const_buffer bytes,
                                 peer_may what, error_code& ec)
    // For remote write, the bytes are the caller's reply buffer, mutable.
    : region_(conn, mutable_view(bytes),
              what == peer_may::read ? access::remote_read
                                     : access::local_write | access::remote_write,
              ec) {
  if (!ec)
    descriptor_ = region_.remote().encode();
}

memory_region register_for_bulk(asio_rdma::connection* rdma, std::span<std::byte> bytes,
                                access flags, error_code& ec) {
  if (!rdma) {
    ec = asio_rdma::detail::with_message(asio_rdma::errc::operation_not_supported,
                                         "registered memory needs an RDMA connection; this "
                                         "one is TCP");
    return {};
  }
  return memory_region(*rdma, bytes, flags, ec);
}

std::optional<local_buffer> registered_slice(const connection& conn, const memory_region* holding,
                                             const void* data, std::size_t size, access needs,
                                             error_code& ec) noexcept {
  ec.clear();
  if (!holding || !holding->is_registered() ||
      holding->native_handle()->pd != conn.native_protection_domain())
    return std::nullopt;
  const auto* first = static_cast<const std::byte*>(data);
  const auto region = holding->data();
  if (first < region.data() || size > region.size() ||
      std::size_t(first - region.data()) > region.size() - size) {
    ec = make_error_code(asio_rdma::errc::out_of_bounds);
    return std::nullopt;
  }
  if (!has(holding->flags(), needs)) {
    ec = make_error_code(boost::asio::error::invalid_argument);
    return std::nullopt;
  }
  return holding->slice(std::size_t(first - region.data()), size);
}

exposed_payload::exposed_payload(const connection& conn, boost::asio::const_buffer bytes,
                                 peer_may what, const memory_region* callers, error_code& ec) {
  const access needs =
      what == peer_may::read ? access::remote_read : access::local_write | access::remote_write;
  const auto slice = registered_slice(conn, callers, bytes.data(), bytes.size(), needs, ec);
  if (ec)
    return;
  if (!slice) {
    *this = exposed_payload(conn, bytes, what, ec);
    return;
  }
  descriptor_ =
      callers->remote(std::size_t(slice->data - callers->data().data()), bytes.size()).encode();
}

namespace {
/// A transfer from or into memory the user registered; `ec` is why `holding` cannot serve.
void transfer_held(connection& conn, const std::optional<local_buffer>& slice, const error_code& ec,
                   std::size_t n, const remote_buffer& theirs, bool push, io_done done) {
  auto state = std::make_shared<transfer_state>();
  state->done = std::move(done);
  state->bytes = n;
  if (ec) {
    return boost::asio::post(conn.get_executor(),
                             [state, ec] { state->done.fn(state->done.owner.get(), ec, 0); });
  }
  transfer_pieces(conn, state, *slice, theirs, push);
}
} // namespace

void pull(connection& conn, std::span<std::byte> into, const memory_region* holding,
          const remote_buffer& from, io_done done) {
  error_code ec;
  const auto slice = registered_slice(conn, holding, into.data(), into.size(),
                                      access::local_write | access::remote_write, ec);
  if (!slice && !ec)
    return pull(conn, into, from, std::move(done));
  transfer_held(conn, slice, ec, into.size(), from, false, std::move(done));
}

void push(connection& conn, boost::asio::const_buffer from, const memory_region* holding,
          const remote_buffer& to, io_done done) {
  error_code ec;
  const auto slice = registered_slice(conn, holding, from.data(), from.size(), access::none, ec);
  if (!slice && !ec)
    return push(conn, from, to, std::move(done));
  transfer_held(conn, slice, ec, from.size(), to, true, std::move(done));
}

void pull(connection& conn, std::span<std::byte> into, const remote_buffer& from,
          io_done done) {
  transfer_registered(conn, into, access::local_write | access::remote_write, from, false,
                      std::move(done));
}

} // namespace asio_rdma::rpc::detail
