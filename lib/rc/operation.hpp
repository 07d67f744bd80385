// The state of one data operation (send, receive, ...) while it is queued or
// posted. Pooled per connection; its address is the work request's wr_id.
#pragma once

#include "async/object_pool.hpp"
#include "verbs/completion.hpp"

#include <asio_rdma/connection.hpp>
#include <asio_rdma/detail/buffer_array.hpp>
#include <asio_rdma/detail/handlers.hpp>

#include <array>
#include <cstdint>
#include <optional>

namespace asio_rdma::detail {

class connection_impl;

enum class op_kind : std::uint8_t {
  send,      // copied from user buffers into a send slot (or inline) when posted
  work,      // zero-copy send, RDMA write/read, atomics: the WR is built at initiation
  receive,   // waits for a message; never posted (the library's buffers are)
};

struct operation : completion_target, queue_hook {
  static constexpr std::uint32_t no_slot = ~std::uint32_t(0);

  // The work request's fields that never change are set once: a pooled operation is
  // reused, and prepare_work/prepare_send fill in only what an operation decides.
  operation() noexcept {
    wr.wr_id = wr_id();
    wr.sg_list = sge;
  }
  operation(const operation&) = delete;
  operation& operator=(const operation&) = delete;

  operation* next = nullptr; // the pool's free list; a posted chain's handlers due
  connection_impl* owner = nullptr;
  op_kind kind = op_kind::send;
  /// Posted to the send queue (no longer cancellable).
  bool posted = false;
  /// Counted among the connection's pending user operations.
  bool counted = false;
  /// An atomic: its result lands in the connection's atomic result slot.
  bool atomic = false;
  /// A copied send that completes when posted (send_completion::at_post), or a request
  /// posted by connection_impl::post_completed (no handler): its work request's
  /// completion, if it asks for one, only frees the operation.
  bool completed_at_post = false;
  /// Posted by connection_impl::post_completed: no handler, completed at post.
  bool handler_less = false;
  /// Posted and completed at post, its handler not yet run: on the connection's list of
  /// handlers due (linked by `next`; run_due_handlers frees it if acknowledged meanwhile).
  bool handler_due = false;
  /// Its work request completed while its handler was due.
  bool acknowledged = false;
  std::optional<std::uint32_t> immediate; // send with immediate
  std::uint32_t send_slot = no_slot;
  /// The handler: a send's, a one-sided operation's or a batch's (its first request's)...
  size_operation handler;
  /// ...or a receive's (async_receive's too: see size_of_message).
  message_operation receive_handler;
  /// A receive that lends the message in its ring slot (async_receive_lent) instead of
  /// copying it into `destination`.
  bool lends = false;
  /// Small messages are copied here at initiation, so they need no user
  /// buffer afterwards (also used by async_send_remote_buffer).
  std::array<std::byte, 32> small{};
  const_buffer_array source;       // send
  mutable_buffer_array destination; // receive
  std::size_t length = 0;
  /// A request of a batch (async_batch): the batch's first request, which holds the
  /// handler and what follows; null for a single operation.
  operation* batch = nullptr;
  // Kept in a batch's first request only: its requests not yet finished, their bytes,
  // and the first error any of them met.
  std::uint32_t batch_remaining = 0;
  std::uint64_t batch_bytes = 0;
  error_code batch_error;
  /// Its wr_id (this operation) and sg_list (sge) are set at construction; the rest by
  /// prepare_work or prepare_send. Fields an opcode does not use may hold an earlier
  /// operation's values: the device reads only those of the opcode.
  ibv_send_wr wr{};
  ibv_sge sge[max_buffers]{};

  /// Uses a receive buffer at the peer (send_window's credits): a send, or a write with
  /// immediate data. Known before the request is prepared: a send's opcode is set when it
  /// is posted, other work's at initiation.
  bool takes_peer_receive() const noexcept {
    return kind == op_kind::send || wr.opcode == IBV_WR_SEND ||
           wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  }
};

} // namespace asio_rdma::detail
