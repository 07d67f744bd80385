#include "verbs/device.hpp"

#include "error_message.hpp"
#include "trace.hpp"
#include "verbs/verbs_error.hpp"

#include <csignal>
#include <map>
#include <mutex>

namespace asio_rdma::detail {

namespace {

void ignore_signal(int) {}

/// SoftiWARP transmits a user queue pair's requests inside the ibv_post_send system call,
/// on a kernel TCP socket and without MSG_NOSIGNAL: a request posted after the peer's TCP
/// connection broke can raise SIGPIPE in the posting thread, and SIGPIPE's default action
/// ends the process (rdma_echo's client died so, status 141 and no output, in 1 of 12
/// runs of its test when the server dropped it). The failed request's completion already
/// tells the library that the connection ended, as on every device. So, once per process
/// and only if the program left SIGPIPE at its default, the library catches it with a
/// handler that does nothing. A handler, not SIG_IGN: a program this one executes starts
/// with the default again, as it would have. A handler or SIG_IGN the program set stays.
void keep_sigpipe_from_ending_the_process() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) ||
        current.sa_handler != SIG_DFL)
      return;
    struct sigaction catcher {};
    catcher.sa_handler = ignore_signal;
    catcher.sa_flags = SA_RESTART;
    sigemptyset(&catcher.sa_mask);
    if (::sigaction(SIGPIPE, &catcher, nullptr) == 0)
      ASIO_RDMA_TRACE("SoftiWARP in use: SIGPIPE from its in-syscall transmission is caught "
                      "(it was at its default action)");
  });
}

} // namespace

std::shared_ptr<device> get_device(ibv_context* context, error_code& ec) {
  // Connections on different io_contexts (threads) may share a device.
  static std::mutex mutex;
  static std::map<ibv_context*, std::weak_ptr<device>> devices;
  std::lock_guard lock(mutex);
  if (auto existing = devices[context].lock()) {
    ec = {};
    return existing;
  }
  auto d = std::make_shared<device>();
  d->context = context;
  if (int rc = ::ibv_query_device(context, &d->attributes)) {
    ec = from_returned_errno(rc);
    return nullptr;
  }
  d->iwarp = context->device->transport_type == IBV_TRANSPORT_IWARP;
  constexpr std::uint32_t softiwarp_vendor_id = 0x626d74; // siw.h: ASCII "bmt"
  d->soft_iwarp = d->iwarp && d->attributes.vendor_id == softiwarp_vendor_id;
  constexpr std::uint32_t softroce_vendor_id = 0xffffff; // rxe_param.h: RXE_VENDOR_ID
  d->soft_roce = !d->iwarp && d->attributes.vendor_id == softroce_vendor_id;
  if (d->soft_iwarp)
    keep_sigpipe_from_ending_the_process();
  d->name = ::ibv_get_device_name(context->device);
  d->no_immediate_data =
      d->iwarp ? with_message(errc::operation_not_supported,
                              d->name + " is an iWARP device: iWARP has no write or send with "
                                        "immediate data")
               : error_code(errc::operation_not_supported);
  d->no_atomics = with_message(errc::operation_not_supported,
                               d->name + " has no atomic operations (its device_info reports "
                                         "atomic_capability::none)");
  d->pd.reset(::ibv_alloc_pd(context));
  if (!d->pd) {
    ec = from_errno();
    return nullptr;
  }
  devices[context] = d;
  ec = {};
  return d;
}

error_code device::limit_exceeded(std::string_view what, std::uint64_t asked, int maximum,
                                  std::string_view limit) const {
  std::string text(what);
  text += ' ';
  text += std::to_string(asked);
  text += " exceeds ";
  text += name;
  text += "'s maximum ";
  text += std::to_string(maximum);
  text += " (";
  text += limit;
  text += ')';
  return with_message(errc::device_limit_exceeded, std::move(text));
}

error_code refused_without_errno(ibv_context* context, std::string_view what) {
  std::string text = ::ibv_get_device_name(context->device);
  text += " refused ";
  text += what;
  text += " without an error number (SoftiWARP does so once a process holds about 144 "
          "pages of queues; see docs/devices.md)";
  return with_message(errc::device_limit_exceeded, std::move(text));
}

} // namespace asio_rdma::detail
