#!/usr/bin/env bash
# Runs on the RDMA device (called by scripts/demo.sh through test/vm/run.sh):
# an rdma_echo server and client, then a short rdma_bench sweep.
set -euo pipefail
build_dir=$1
addr=${ASIO_RDMA_TEST_ADDR:?run through test/vm/run.sh}
bin=$build_dir/apps/rdma_echo/rdma_echo
bench=$build_dir/bench/rdma_bench/rdma_bench

servers=()
cleanup() { for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Start a server and wait for its "listening" line (no sleep-and-hope).
start_server() { # name, log, command...
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 &
  servers+=($!)
  for _ in $(seq 1 200); do
    grep -q listening "$log" && return 0
    kill -0 "${servers[-1]}" 2>/dev/null || { cat "$log"; echo "$name server died"; return 1; }
    sleep 0.05
  done
  cat "$log"
  echo "$name server did not start listening"
  return 1
}

tmp=$(mktemp -d)
echo "### rdma_echo on $addr"
start_server rdma_echo "$tmp/echo.log" "$bin" server --bind "$addr" --port 7471
"$bin" client "$addr" --port 7471 --count 2000 --size 4096 --depth 16
"$bin" client "$addr" --port 7471 --count 2000 --size 64 --depth 32

echo "### rdma_bench (short sweep) on $addr"
start_server rdma_bench "$tmp/bench.log" "$bench" server --bind "$addr" --port 7472
"$bench" client "$addr" --port 7472 --op write --sizes 64,4096,65536 --duration 1 --completion busy
"$bench" client "$addr" --port 7472 --op send --sizes 64,4096,65536 --duration 1 --completion busy
"$bench" client "$addr" --port 7472 --op write --mode lat --size 8 --iterations 500 --completion busy
