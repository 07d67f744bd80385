// Move-only owners of verbs and rdmacm objects: a unique_ptr with a noexcept
// deleter each. Declare them in creation order so destruction runs in reverse.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <memory>

namespace asio_rdma::detail {

struct device_list_deleter {
  void operator()(ibv_device** p) const noexcept { ::ibv_free_device_list(p); }
};
struct context_deleter {
  void operator()(ibv_context* p) const noexcept { ::ibv_close_device(p); }
};
struct pd_deleter {
  void operator()(ibv_pd* p) const noexcept { ::ibv_dealloc_pd(p); }
};
struct mr_deleter {
  void operator()(ibv_mr* p) const noexcept { ::ibv_dereg_mr(p); }
};
struct comp_channel_deleter {
  void operator()(ibv_comp_channel* p) const noexcept { ::ibv_destroy_comp_channel(p); }
};
struct cq_deleter {
  void operator()(ibv_cq* p) const noexcept { ::ibv_destroy_cq(p); }
};
struct qp_deleter {
  void operator()(ibv_qp* p) const noexcept { ::ibv_destroy_qp(p); }
};
struct srq_deleter {
  void operator()(ibv_srq* p) const noexcept { ::ibv_destroy_srq(p); }
};
struct ah_deleter {
  void operator()(ibv_ah* p) const noexcept { ::ibv_destroy_ah(p); }
};
struct flow_deleter {
  void operator()(ibv_flow* p) const noexcept { ::ibv_destroy_flow(p); }
};
struct event_channel_deleter {
  void operator()(rdma_event_channel* p) const noexcept { ::rdma_destroy_event_channel(p); }
};
struct cm_id_deleter {
  // rdma_destroy_id waits until every event reported for the id has been
  // acknowledged; the event loop acknowledges each event before dispatching it.
  void operator()(rdma_cm_id* p) const noexcept { ::rdma_destroy_id(p); }
};

/// ibv_get_device_list's array.
using device_list_ptr = std::unique_ptr<ibv_device*, device_list_deleter>;
using context_ptr = std::unique_ptr<ibv_context, context_deleter>;
using pd_ptr = std::unique_ptr<ibv_pd, pd_deleter>;
using mr_ptr = std::unique_ptr<ibv_mr, mr_deleter>;
using comp_channel_ptr = std::unique_ptr<ibv_comp_channel, comp_channel_deleter>;
using cq_ptr = std::unique_ptr<ibv_cq, cq_deleter>;
using qp_ptr = std::unique_ptr<ibv_qp, qp_deleter>;
using srq_ptr = std::unique_ptr<ibv_srq, srq_deleter>;
using ah_ptr = std::unique_ptr<ibv_ah, ah_deleter>;
using flow_ptr = std::unique_ptr<ibv_flow, flow_deleter>;
using event_channel_ptr = std::unique_ptr<rdma_event_channel, event_channel_deleter>;
using cm_id_ptr = std::unique_ptr<rdma_cm_id, cm_id_deleter>;

} // namespace asio_rdma::detail
