#!/usr/bin/env bash
# UD latency of asio_rdma's datagram_socket vs perftest's ib_send_lat -c UD,
# alternated (A B A B) in one boot of the SoftRoCE VM or on a local device:
#   test/vm/run.sh -- bench/ud_latency/compare.sh [BUILD_DIR] [REPS]
set -uo pipefail
build=${1:-build}
reps=${2:-2}
addr=${ASIO_RDMA_TEST_ADDR:?run through test/vm/run.sh}
dev=${ASIO_RDMA_DEVICE:-rxe0}
size=64
iters=2000
# The RoCE v2 GID of the address (ibv_devinfo lists it as ::ffff:a.b.c.d).
gid=$(ibv_devinfo -v -d "$dev" | awk -v a="$addr" '/GID\[/ && $0 ~ a && /RoCE v2/ {gsub(/[^0-9]/,"",$1); print $1; exit}')
gid=${gid:-1}

# Retries a client until its server listens (no fixed sleep).
retry() {
  for _ in $(seq 1 50); do
    if out=$("$@" 2>&1); then
      printf '%s\n' "$out"
      return 0
    fi
    sleep 0.2
  done
  printf '%s\n' "$out"
  return 1
}

perftest() { # rep, label, extra flags...
  local rep=$1 label=$2
  shift 2
  ib_send_lat -c UD -d "$dev" -x "$gid" -s $size -n $iters -p 18515 "$@" >/tmp/perf_server.$rep 2>&1 &
  local server=$!
  echo "## rep $rep perftest $label"
  retry ib_send_lat -c UD -d "$dev" -x "$gid" -s $size -n $iters -p 18515 "$@" "$addr" |
    grep -A1 't_min' | tail -2
  wait $server
}

for rep in $(seq 1 "$reps"); do
  # perftest busy-polls by default; -e waits for completion events as
  # asio_rdma's default completion mode does.
  perftest "$rep" "(busy poll)"
  perftest "$rep" "-e (events)" -e
  for mode in busy_poll event; do
    "$build/bench/ud_latency/ud_latency" server "$addr" 7600 --completion $mode \
      >/tmp/ud_server.$rep 2>&1 &
    server=$!
    echo "## rep $rep asio_rdma ($mode)"
    retry "$build/bench/ud_latency/ud_latency" client "$addr" 7600 --size $size \
      --iterations $iters --completion $mode
    kill "$server"
    wait "$server" 2>/dev/null
  done
done
