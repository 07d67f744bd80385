// self_hold: an object's reference to itself while work it started may still finish into
// its memory (a connection closing: the device flushing, a linger), ended by the
// io_context's shutdown when the io_context is destroyed first.
#pragma once

#include "asio_alias.hpp"

#include <boost/asio/execution_context.hpp>
#include <boost/intrusive/list.hpp>

#include <memory>
#include <mutex>

namespace asio_rdma::detail {

class self_hold_registry;

/// Holds a shared_ptr to its owner. Without the registry, an owner destroyed only by
/// finishing its close would leak (with its queue pair, registered memory and file
/// descriptors) when the io_context is destroyed before that: Asio's own objects are
/// released by the io_context's destruction, and so is this one.
class self_hold {
public:
  explicit self_hold(asio::execution_context& context);
  self_hold(const self_hold&) = delete;
  self_hold& operator=(const self_hold&) = delete;

  /// Holds `self` (no effect if already held, or once the io_context has shut down).
  void hold(std::shared_ptr<void> self);
  /// Ends the hold; the caller keeps the returned reference until it may destroy the owner.
  [[nodiscard]] std::shared_ptr<void> release() noexcept;

private:
  friend class self_hold_registry;
  self_hold_registry* registry_;
  boost::intrusive::list_member_hook<> hook_;
  std::shared_ptr<void> self_;
};

/// The io_context's list of held objects (an execution_context service): its shutdown,
/// which runs when the io_context is destroyed, drops every hold.
class self_hold_registry final : public asio::execution_context::service {
public:
  using key_type = self_hold_registry;
  static inline asio::execution_context::id id;

  explicit self_hold_registry(asio::execution_context& context) : service(context) {}

  /// False once shut down: nothing more is held.
  bool add(self_hold& h);
  void remove(self_hold& h) noexcept;

private:
  void shutdown() override;

  using list = boost::intrusive::list<
      self_hold, boost::intrusive::member_hook<self_hold, boost::intrusive::list_member_hook<>,
                                               &self_hold::hook_>>;
  std::mutex mutex_; // connections on one io_context may run on several threads
  list held_;
  bool shut_down_ = false;
};

} // namespace asio_rdma::detail
