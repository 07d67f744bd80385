#!/usr/bin/env bash
# The main job: sets up and builds the project, then, on the local RDMA
# device or else in the SoftRoCE VM, runs the rdma_echo server and client and
# a short rdma_bench sweep, printing their results.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}

scripts/setup.sh
# Only what the demo runs: the tests take most of a full build's time.
scripts/build.sh rdma_echo rdma_bench
exec test/vm/run.sh --timeout 1200 -- bash scripts/demo_in_device.sh "$build_dir"
