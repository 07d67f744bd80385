// rdma_bench's baseline: the same tests written directly on ibverbs and
// rdmacm, perftest's way (a window of outstanding work requests, selective
// signalling, batched polling), without the library's asynchronous layer.
#pragma once

#include "options.hpp"

namespace rdma_bench::raw {

/// Serves raw-verbs clients one after another until killed; returns the exit
/// status on a fatal error.
int serve(const settings& s);

/// Runs the raw-verbs client; returns the exit status.
int run_client(const settings& s);

} // namespace rdma_bench::raw
