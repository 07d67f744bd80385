#include "verbs/device.hpp"

#include "verbs/verbs_error.hpp"

#include <map>
#include <mutex>

namespace asio_rdma::detail {

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
  d->pd.reset(::ibv_alloc_pd(context));
  if (!d->pd) {
    ec = from_errno();
    return nullptr;
  }
  devices[context] = d;
  ec = {};
  return d;
}

} // namespace asio_rdma::detail
