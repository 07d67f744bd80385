# Sourced by the rdma_fabric tests: run_fabric DIR LAUNCHER... -- ARGS...
# runs the launcher with rdma_fabric, its stdout in DIR/table.txt, and sets
# `status` to the launcher's exit status.
# A guest of test/vm has no host name ("(none)"), which Open MPI refuses as a
# node name: run the test in a UTS namespace of its own with a name (the
# machine's own name is left alone).
if [[ $(hostname) == "(none)" && -z ${FABRIC_TEST_UTS:-} ]]; then
  name=fabric-${ASIO_RDMA_HOST:-vm}
  exec env FABRIC_TEST_UTS=1 unshare --uts bash -c 'hostname "$1" && shift && exec "$@"' \
    sh "${name,,}" "$0" "$@"
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# MPI's own traffic (bootstrap, barriers) over shared memory and TCP: the
# measured traffic is asio_rdma's, and Open MPI's UCX/verbs paths would
# otherwise try the same SoftRoCE device.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_osc=^ucx OMPI_MCA_rmaps_base_oversubscribe=1
status=0
# Matplotlib's font cache: built by the build (test/bench/CMakeLists.txt), else once here
# (slowly, in a guest) and kept.
export MPLCONFIGDIR=${MPLCONFIGDIR:-$(dirname "$(readlink -f "$1")")/mplconfig}

run_fabric() { # dir launcher... -- fabric args...
  local dir=$1
  shift
  mkdir -p "$dir"
  echo "+ $*"
  set +e
  "$@" | tee "$dir/table.txt"
  status=${PIPESTATUS[0]}
  set -e
  echo "exit status $status"
}

check() { # dir ranks [check_output options]
  /usr/bin/python3 "$here/check_output.py" "$1" "$2" "$status" "${@:3}"
}
