// The one place where the four ways verbs and rdmacm report failure are turned
// into error_codes in system_category() (so they compare equal to asio::error).
#pragma once

#include <asio_rdma/error.hpp>

#include <cerrno>
#include <fcntl.h>

namespace asio_rdma::detail {

/// For calls that return an errno value directly (ibv_post_send, ibv_modify_qp, ...).
/// Some providers return the negative errno (siw's ibv_post_send: -EINVAL); it is the
/// same error.
inline error_code from_returned_errno(int ret) noexcept {
  return ret == 0 ? error_code() : error_code(ret < 0 ? -ret : ret, boost::system::system_category());
}

/// For calls that return NULL or -1 and set errno (ibv_alloc_pd, rdma_*).
/// An unset errno still yields an error: a failure must never read as success.
inline error_code from_errno() noexcept {
  return error_code(errno != 0 ? errno : EIO, boost::system::system_category());
}

/// For calls returning -1 + errno on failure and 0 on success (rdma_bind_addr, ...).
inline error_code from_minus_one(int ret) noexcept {
  return ret == 0 ? error_code() : from_errno();
}

/// For calls returning a count that is negative on failure (ibv_poll_cq): the
/// count carries no errno, so the failure is reported as EIO unless errno says more.
inline error_code from_negative_count(int n) noexcept {
  if (n >= 0)
    return {};
  return error_code(errno != 0 ? errno : EIO, boost::system::system_category());
}

/// Makes a channel fd non-blocking, so that draining it stops at EAGAIN
/// instead of blocking the io_context.
inline error_code set_nonblocking(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return from_errno();
  return {};
}

} // namespace asio_rdma::detail
