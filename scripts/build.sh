#!/usr/bin/env bash
# Configures and builds the project into ${BUILD_DIR:-build} (Release with
# debug info). Used by scripts/test.sh and scripts/demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASIO_RDMA_WITH_RAW_SOCKET=ON >/dev/null
# Two jobs: the project's machines have two cores.
cmake --build "$build_dir" -j "${BUILD_JOBS:-2}"
