// self_hold and its registry: see self_hold.hpp.
#include "async/self_hold.hpp"

#include <vector>

namespace asio_rdma::detail {

self_hold::self_hold(asio::execution_context& context)
    : registry_(&asio::use_service<self_hold_registry>(context)) {}

void self_hold::hold(std::shared_ptr<void> self) {
  if (self_ || !registry_->add(*this))
    return;
  self_ = std::move(self);
}

std::shared_ptr<void> self_hold::release() noexcept {
  if (self_)
    registry_->remove(*this);
  return std::move(self_);
}

bool self_hold_registry::add(self_hold& h) {
  std::lock_guard lock(mutex_);
  if (shut_down_)
    return false;
  held_.push_back(h);
  return true;
}

void self_hold_registry::remove(self_hold& h) noexcept {
  std::lock_guard lock(mutex_);
  if (h.hook_.is_linked())
    held_.erase(held_.iterator_to(h));
}

void self_hold_registry::shutdown() {
  // Take the references out under the lock, drop them after it: an owner's destructor
  // removes nothing (its hold is already unlinked) but may reach other services.
  std::vector<std::shared_ptr<void>> dropped;
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
    while (!held_.empty()) {
      self_hold& h = held_.front();
      held_.pop_front();
      dropped.push_back(std::move(h.self_));
    }
  }
  dropped.clear();
}

} // namespace asio_rdma::detail
