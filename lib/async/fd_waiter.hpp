// Waits for a file descriptor (an rdma_cm event channel or a completion
// channel) to become readable on the user's io_context, but only while
// somebody needs it ("interest"): completions while a user operation is
// pending, CM events while a connection is open or being set up. A closed
// connection therefore leaves no work in the io_context, and an open but idle
// one only its CM wait. Events that arrive meanwhile stay in the kernel until
// the next wait.
#pragma once

#include "asio_alias.hpp"
#include "async/callback.hpp"

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <memory>

namespace asio_rdma::detail {

class fd_waiter {
public:
  /// Calls `on_readable` each time the fd is readable while interest is declared.
  fd_waiter(const boost::asio::any_io_executor& ex, int fd, callback on_readable)
      : descriptor_(ex, fd), on_readable_(on_readable) {}
  /// Releases (does not close) the fd, cancelling the pending wait.
  ~fd_waiter() { descriptor_.release(); }
  fd_waiter(const fd_waiter&) = delete;
  fd_waiter& operator=(const fd_waiter&) = delete;

  /// The object that keeps on_readable's context alive (the waiter's owner, which holds
  /// the waiter as a member: set by its factory once the shared_ptr exists). The wait
  /// handler checks it before calling.
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  void add_interest() {
    if (interest_++ == 0)
      arm();
  }
  void remove_interest() {
    if (--interest_ == 0 && armed_) {
      error_code ignored;
      descriptor_.cancel(ignored);
    }
  }
  /// Stops waiting for good (the owner is being torn down).
  void stop() {
    stopped_ = true;
    error_code ignored;
    descriptor_.cancel(ignored);
  }

private:
  void arm() {
    if (armed_ || interest_ == 0 || stopped_)
      return;
    armed_ = true;
    descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this, owner = owner_](const error_code& ec) {
                             auto alive = owner.lock();
                             if (!alive)
                               return;
                             armed_ = false;
                             if (!ec && !stopped_)
                               on_readable_();
                             arm(); // if still wanted
                           });
  }

  boost::asio::posix::stream_descriptor descriptor_;
  callback on_readable_;
  std::weak_ptr<void> owner_;
  int interest_ = 0;
  bool armed_ = false;
  bool stopped_ = false;
};

} // namespace asio_rdma::detail
