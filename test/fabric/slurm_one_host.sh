#!/usr/bin/env bash
# rdma_fabric under Slurm: a single-node cluster (slurmctld + slurmd from
# Debian's slurm-wlm) started here in a temporary folder, then srun -n 4 with
# the same checks as under mpirun.
set -euo pipefail
fabric=$1
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/slurm_cluster.sh"
out=$(mktemp -d)
trap 'slurm_stop; rm -rf "$out"' EXIT

slurm_start "$out/slurm" 127.0.0.1 node0:127.0.0.1:4
slurm_wait_nodes 1 60
srun --mpi=list

# No heatmap (matplotlib takes about 17 s in the VM): the mpirun test draws one.
run_fabric "$out/all" srun -n 4 --mpi=pmix --time=5 "$fabric" --quick --no-retest --timeout 60 \
  --json "$out/all/fabric.json"
[[ $status -le 1 ]] || {
  echo "FAIL: rdma_fabric under srun exited $status"
  tail -n 30 "$out/slurm/"*.log
  exit 1
}
check "$out/all" 4 --no-png
echo "PASS"
