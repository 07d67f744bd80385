#!/usr/bin/env bash
# rdma_fabric under mpirun: 4 ranks on this host, all over its one RDMA
# device (in the VM: rxe0). A 4x4 matrix, valid JSON, the heatmap, and an exit
# status that matches the verdict (no retests: the VM is noisy); then 2 ranks with a latency limit nobody
# meets: flagged, retested, exit status 1.
set -euo pipefail
fabric=$1
source "$(dirname "$0")/common.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

run_fabric "$out/all" "${mpirun[@]}" -np 4 "$fabric" --quick --no-retest --timeout 60 \
  --json "$out/all/fabric.json" --heatmap "$out/all/fabric.png"
[[ $status -le 1 ]] || { echo "FAIL: rdma_fabric exited $status"; exit 1; }
check "$out/all" 4

# No heatmap this time: drawing one takes matplotlib about 17 s in the VM, and the
# first run has shown it works.
run_fabric "$out/flag" "${mpirun[@]}" -np 2 "$fabric" --quick --timeout 60 \
  --max-latency-us 0.001 --json "$out/flag/fabric.json"
[[ $status -eq 1 ]] || { echo "FAIL: a flagged pair must give exit status 1, got $status"; exit 1; }
check "$out/flag" 2 --expect-flagged latency --no-png
grep -q 'FLAGGED latency 0 <-> 1: .* > maximum 0.001 us; retest: confirmed' "$out/flag/table.txt"
echo "PASS"
