# Sourced by the Slurm tests: a throw-away Slurm cluster (Debian's slurm-wlm)
# whose configuration, state and logs live in one temporary folder.
#
#   slurm_start DIR CONTROLLER_ADDR NODE:ADDR:CPUS...   writes DIR/slurm.conf,
#                         starts slurmctld (when this host is the controller,
#                         i.e. CONTROLLER_ADDR is one of its addresses) and a
#                         slurmd for each NODE whose ADDR is this host's
#   slurm_wait_nodes N S  waits up to S s until N nodes are idle and no job is left
#   slurm_refresh         has every slurmd register again with the controller
#   slurm_report          prints what sinfo, squeue and the logs say
#   slurm_stop            stops the daemons this shell started
#
# No munge: auth/none and cred/none (both in slurm-wlm 22.05), fine for a
# cluster that lives inside one test. Every daemon runs as root.
#
# slurmd (22.05) will not start without a cgroup hierarchy, even with
# proctrack/linuxproc and task/none, and the test VM mounts none; its cgroup
# v2 plugin also wants systemd. So the test runs in a mount namespace of its
# own with a cgroup v1 freezer hierarchy on /sys/fs/cgroup (the machine's
# mounts are left alone).
if [[ -z ${SLURM_TEST_MNT:-} ]]; then
  exec env SLURM_TEST_MNT=1 unshare --mount --propagation private "$0" "$@"
fi
mount -t tmpfs slurm-test /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/freezer
mount -t cgroup -o freezer slurm-test /sys/fs/cgroup/freezer
slurm_pids=()

slurm_start() {
  local dir=$1 controller=$2
  shift 2
  export SLURM_CONF=$dir/slurm.conf
  mkdir -p "$dir/state" "$dir/spool"
  {
    echo "ClusterName=fabric"
    echo "SlurmctldHost=ctl($controller)"
    echo "SlurmctldPort=${SLURM_TEST_CTLD_PORT:-16817}"
    echo "SlurmdPort=${SLURM_TEST_SLURMD_PORT:-16818}"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    echo "SlurmUser=root"
    echo "MailProg=/bin/true"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd.pid"
    echo "SlurmctldLogFile=$dir/slurmctld.log"
    echo "SlurmdLogFile=$dir/slurmd.%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SwitchType=switch/none"
    echo "MpiDefault=pmix"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "ReturnToService=2"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SlurmctldTimeout=30"
    # The two-host test cuts the link for seconds on purpose: the controller must not
    # take a node down for that (a node is DOWN after this long without an answer).
    echo "SlurmdTimeout=300"
    # Under a loaded TCG guest a killed step's processes can take a while to
    # go: the node must not be drained ("Kill task failed") for that either.
    echo "UnkillableStepTimeout=180"
    echo "MessageTimeout=30"
    echo "KillWait=5"
    local nodes=() spec name addr cpus
    for spec in "$@"; do
      IFS=: read -r name addr cpus <<<"$spec"
      echo "NodeName=$name NodeAddr=$addr NodeHostname=$name CPUs=$cpus State=UNKNOWN"
      nodes+=("$name")
    done
    local IFS=,
    echo "PartitionName=fabric Nodes=${nodes[*]} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
  } >"$dir/slurm.conf"
  echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"

  local mine
  mine=" $(hostname -I 2>/dev/null) 127.0.0.1 "
  if [[ $mine == *" $controller "* ]]; then
    # slurmctld insists that its host name is the controller's: give it one
    # in a UTS namespace of its own (the machine's name is left alone).
    unshare --uts sh -c 'hostname ctl && exec slurmctld -D -i -f "$1"' sh "$SLURM_CONF" \
      >"$dir/slurmctld.out" 2>&1 &
    slurm_pids+=($!)
  fi
  for spec in "$@"; do
    IFS=: read -r name addr cpus <<<"$spec"
    if [[ $mine == *" $addr "* ]]; then
      mkdir -p "$dir/spool/$name"
      slurmd -D -N "$name" -f "$SLURM_CONF" >"$dir/slurmd.$name.out" 2>&1 &
      slurm_pids+=($!)
    fi
  done
}

slurm_wait_nodes() { # count [seconds]: until count nodes are idle and no job is left
  local want=$1 limit=${2:-60} i idle jobs pid
  for ((i = 0; i < limit * 2; i++)); do
    for pid in "${slurm_pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "slurm: a daemon exited" >&2; break 2; }
    done
    # Idle and responding: "idle*" is a node the controller could not reach last time
    # it tried, which it schedules nothing on until the node answers again.
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
    jobs=$(squeue -h 2>/dev/null | wc -l)
    if [[ $idle -ge $want && $jobs -eq 0 ]]; then
      echo "slurm: $want node(s) idle after $((i / 2)) s"
      return 0
    fi
    sleep 0.5
  done
  echo "slurm: $want idle node(s) and no job expected within $limit s" >&2
  slurm_report
  return 1
}

slurm_refresh() { # asks every slurmd to register again (clears a stale "not responding")
  scontrol reconfigure >&2 || true
}

slurm_report() { # what the cluster says about its nodes and jobs, to stderr
  {
    sinfo -N -l || true
    sinfo -R || true
    squeue -l || true
    tail -n 40 "$(dirname "$SLURM_CONF")"/*.log || true
  } >&2
}

slurm_stop() { # SIGTERM, then SIGKILL what is left after 20 s (a daemon that still
  # talks to a dead node's slurmd can take minutes to shut down)
  local pid i left start=$SECONDS
  for pid in "${slurm_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 40; i++)); do
    left=0
    for pid in "${slurm_pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && left=1
    done
    ((left)) || break
    sleep 0.5
  done
  if ((left)); then
    echo "slurm: daemons still running 20 s after SIGTERM, killed:" >&2
    ps -o pid,stat,etime,args -p "$(IFS=,; echo "${slurm_pids[*]}")" >&2 || true
    for pid in "${slurm_pids[@]}"; do
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  for pid in "${slurm_pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  slurm_pids=()
  echo "slurm: stopped in $((SECONDS - start)) s" >&2
}
