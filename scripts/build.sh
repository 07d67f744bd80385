#!/usr/bin/env bash
# Configures and builds the project into ${BUILD_DIR:-build} (Release with
# debug info): everything, or only the targets given as arguments.
# Used by scripts/test.sh (everything) and scripts/demo.sh (what it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
# Line tables only (-g1): backtraces and gdb's stacks name every frame's function and line;
# full debug information made this build about a quarter slower. ASIO_RDMA_FAST_BUILD:
# the library in unity batches, linked with mold (CMakeLists.txt).
# ASIO_RDMA_EXCLUDE_FROM_ALL (environment): targets left out of "everything" (test.sh's
# list: the benchmarks no test runs); given every time, so that a later plain
# scripts/build.sh builds them again.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DASIO_RDMA_FAST_BUILD=ON -DASIO_RDMA_WITH_RAW_SOCKET=ON \
  "-DASIO_RDMA_EXCLUDE_FROM_ALL=${ASIO_RDMA_EXCLUDE_FROM_ALL:-}" >/dev/null
# Two jobs: the project's machines have two cores.
if [[ $# -gt 0 ]]; then
  cmake --build "$build_dir" -j "${BUILD_JOBS:-2}" --target "$@"
else
  cmake --build "$build_dir" -j "${BUILD_JOBS:-2}"
fi
