#include "rc/shared_queues_impl.hpp"

#include "error_message.hpp"
#include "rc/connection_impl.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <string>
#include <system_error>

namespace asio_rdma::detail {

shared_queues_impl::~shared_queues_impl() {
  if (cq_)
    cq_->stop();
}

error_code shared_queues_impl::bind(const std::shared_ptr<device>& dev) {
  if (device_)
    return device_ == dev ? error_code() : error_code(errc::invalid_option);
  if (options_.problem())
    return errc::invalid_option;
  // Beyond the device's limits: a clear refusal, not the kernel's ENOMEM or EINVAL.
  if (options_.receive_queue_depth > std::uint32_t(dev->attributes.max_srq_wr))
    return dev->limit_exceeded("shared receive queue depth", options_.receive_queue_depth,
                               dev->attributes.max_srq_wr, "max_srq_wr");
  if (options_.completion_queue_size > std::uint32_t(dev->attributes.max_cqe))
    return dev->limit_exceeded("shared completion queue size", options_.completion_queue_size,
                               dev->attributes.max_cqe, "max_cqe");
  error_code ec;
  auto cq = completion_queue::create(ex_, dev->context,
                                     static_cast<int>(options_.completion_queue_size), ec);
  if (ec)
    return ec;
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = options_.receive_queue_depth;
  attr.attr.max_sge = 1;
  srq_ptr srq(::ibv_create_srq(dev->pd.get(), &attr));
  if (!srq)
    return from_errno();
  if ((ec = ring_.init(dev->pd.get(), options_.receive_queue_depth, options_.max_message_size,
                       &shared_queues_impl::on_receive, this)))
    return ec;
  if ((ec = ring_.post_to(srq.get())))
    return ec;
  cq->attach(weak_from_this(), {&shared_queues_impl::after_batch, this});
  cq->set_mode(options_.completion_mode, options_.adaptive_spin);
  if ((ec = cq->arm()))
    return ec;
  device_ = dev;
  cq_ = std::move(cq);
  srq_ = std::move(srq);
  reserved_ = options_.receive_queue_depth;
  return {};
}

error_code shared_queues_impl::reserve(std::uint32_t entries) {
  const std::uint64_t needed = reserved_ + entries;
  ibv_cq* cq = cq_->native();
  if (needed > std::uint64_t(cq->cqe)) {
    // Full: an overflowing CQ would fail every connection on it, so grow it first.
    const auto most = std::uint64_t(device_->attributes.max_cqe);
    if (needed > most)
      return device_->limit_exceeded(
          "shared completion queue size (the shared receive queue and every attached "
          "connection's send queue)",
          needed, device_->attributes.max_cqe, "max_cqe");
    const auto grown = std::min(most, std::max(needed, 2 * std::uint64_t(cq->cqe)));
    if (int e = ::ibv_resize_cq(cq, int(grown))) {
      std::string text = device_->name;
      text += " cannot grow the shared completion queue (" + std::system_category().message(e) +
              "): its " + std::to_string(cq->cqe) + " entries hold " + std::to_string(reserved_) +
              " already, not another " + std::to_string(entries) +
              " for a connection's send queue; make shared_queue_options::"
              "completion_queue_size large enough for all the connections";
      return with_message(errc::device_limit_exceeded, std::move(text));
    }
  }
  reserved_ = needed;
  return {};
}

void shared_queues_impl::on_receive(completion_target* target, const ibv_wc& wc, from origin) {
  auto* slot = static_cast<receive_slot*>(target);
  auto* self = static_cast<shared_queues_impl*>(slot->owner);
  self->in_batch_ = true;
  connection_impl* conn = self->find(wc.qp_num);
  if (!conn) { // its connection is gone: the buffer is free again
    self->ring_.release(slot->index);
    return;
  }
  // A handler run from here may drop the user's last reference.
  auto keep_alive = conn->shared_from_this();
  conn->handle_receive(slot->index, wc, origin);
}

void shared_queues_impl::after_batch(void* context) {
  auto* self = static_cast<shared_queues_impl*>(context);
  self->in_batch_ = false;
  self->post_released();
}

void shared_queues_impl::release(std::uint32_t slot) {
  ring_.release(slot);
  if (in_batch_ || post_scheduled_)
    return; // posted at the end of the batch, or soon
  post_scheduled_ = true;
  boost::asio::post(ex_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->post_scheduled_ = false;
      self->post_released();
    }
  });
}

void shared_queues_impl::post_released() {
  if (srq_ && ring_.has_released())
    ring_.post_to(srq_.get()); // a failed post keeps its slots for the next one; nothing to fail
}

connection_impl* shared_queues_impl::find(std::uint32_t qp_num) const {
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = (qp_num * 2654435761u) & mask;; i = (i + 1) & mask) {
    if (table_[i].qp_num == qp_num)
      return table_[i].conn;
    if (table_[i].qp_num == 0)
      return nullptr;
  }
}

void shared_queues_impl::add(std::uint32_t qp_num, connection_impl* conn) {
  if ((count_ + 1) * 2 > table_.size())
    grow();
  const std::size_t mask = table_.size() - 1;
  std::size_t i = (qp_num * 2654435761u) & mask;
  while (table_[i].qp_num != 0 && table_[i].qp_num != qp_num)
    i = (i + 1) & mask;
  if (table_[i].qp_num == 0)
    ++count_;
  table_[i] = {qp_num, conn};
}

void shared_queues_impl::remove(std::uint32_t qp_num) {
  // Rebuild without the entry: linear probing cannot simply clear a slot.
  std::vector<entry> old(table_.size());
  old.swap(table_);
  count_ = 0;
  for (const auto& e : old)
    if (e.qp_num != 0 && e.qp_num != qp_num)
      add(e.qp_num, e.conn);
}

void shared_queues_impl::grow() {
  std::vector<entry> old(table_.size() * 2);
  old.swap(table_);
  count_ = 0;
  for (const auto& e : old)
    if (e.qp_num != 0)
      add(e.qp_num, e.conn);
}

} // namespace asio_rdma::detail

namespace asio_rdma {

shared_queues::shared_queues(const boost::asio::any_io_executor& ex,
                             const shared_queue_options& options)
    : impl_(std::make_shared<detail::shared_queues_impl>(ex, options)) {}

std::size_t shared_queues::connections() const noexcept {
  return impl_ ? impl_->connections() : 0;
}

std::size_t shared_queues::completion_queue_size() const noexcept {
  return impl_ ? impl_->cq_entries() : 0;
}

} // namespace asio_rdma
