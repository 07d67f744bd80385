// connection_impl: async_batch, many requests as one operation. Each request
// is an ordinary operation record of the send path (queued, chained, posted
// and completed like any other), linked to the batch's first request, which
// holds the handler and completes the batch once every request has finished.
#include "rc/connection_impl.hpp"

namespace asio_rdma::detail {

namespace {

work_request request_of(const batch_entry& entry) {
  work_request r;
  switch (entry.op()) {
  case batch_entry::kind::send:
    r.op = work_request::kind::send;
    break;
  case batch_entry::kind::write:
    r.op = work_request::kind::write;
    break;
  case batch_entry::kind::read:
    r.op = work_request::kind::read;
    break;
  }
  r.local = {&entry.local(), 1, false};
  r.remote = entry.remote();
  r.immediate = entry.immediate();
  return r;
}

} // namespace

void start_batch(connection_impl* impl, std::span<const batch_entry> entries,
                 size_operation&& pending) {
  impl->batch(entries, std::move(pending));
}

void connection_impl::batch(std::span<const batch_entry> entries, size_operation&& pending) {
  error_code ec = state_ != state::open ? ending_.for_new_work() : check_batch(entries);
  operation* first = new_op(op_kind::work);
  first->handler = std::move(pending);
  if (ec || entries.empty())
    return complete(first, ec, 0, from::user_call);
  first->batch_remaining = static_cast<std::uint32_t>(entries.size());
  first->batch_error = {};
  std::uint64_t bytes = 0;
  // One user operation, counted once; its requests join the send queue one after
  // another (cancel_batch relies on that while none is posted).
  first->counted = true;
  op_started();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    operation* op = i == 0 ? first : new_op(op_kind::work);
    op->batch = first;
    op->on_complete = &connection_impl::on_send_complete;
    prepare_work(op, request_of(entries[i]));
    bytes += op->length;
    sends_.queue(op);
  }
  first->batch_bytes = bytes;
  post_or_batch(first);
}

error_code connection_impl::check_batch(std::span<const batch_entry> entries) const {
  // A batch never waits for room it cannot get, and never grows the operation
  // pool beyond what the send queue holds anyway.
  if (entries.size() > options_.send_queue_depth)
    return asio::error::invalid_argument;
  for (const batch_entry& entry : entries)
    if (error_code ec = check_work(request_of(entry)))
      return ec;
  return {};
}

bool connection_impl::finish_batch_part(operation*& op, error_code& ec, std::size_t& bytes) {
  operation* first = op->batch;
  if (ec && !first->batch_error)
    first->batch_error = ec;
  // The first request keeps the batch's state and handler until the last has
  // finished, whatever the order (a close completes queued requests before
  // posted ones are flushed).
  if (op != first)
    op_pool_.put(op);
  if (--first->batch_remaining > 0)
    return false;
  op = first;
  ec = first->batch_error;
  bytes = ec ? 0 : first->batch_bytes;
  return true;
}

void connection_impl::cancel_batch(operation* first) {
  // Requests are posted in order: if the first is not, none is, and all of
  // them wait in the send queue, one after another from the first.
  if (first->posted)
    return;
  const std::uint32_t count = first->batch_remaining;
  operation* op = first;
  for (std::uint32_t i = 0; i < count && op; ++i) {
    operation* next = i + 1 < count ? sends_.queued_after(op) : nullptr;
    sends_.withdraw(op);
    complete(op, asio::error::operation_aborted, 0, from::user_call);
    op = next;
  }
}

} // namespace asio_rdma::detail
