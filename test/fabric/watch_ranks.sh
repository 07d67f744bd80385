# Sourced by two_hosts.sh: a failure's evidence, live on each host's console.
#   watch_ranks [STDERR_FILE] &   prints, every 5 s, only what is wrong:
#     - a rank (rdma_fabric) that used no CPU for 10 s: its state, kernel and
#       user stacks, and this host's TCP connections to the other (MPI's and
#       Slurm's);
#     - a TCP connection to the other host still retransmitting 12 s or more
#       after its last answer (past the 5 s cut), with the kernel log's tail;
#     - with STDERR_FILE (host B), the ranks' stderr as it is written.
#   stop_watching                 ends it (watcher: the pid of watch_ranks &).
# Bash builtins where it can: every process started costs the 1-vCPU TCG guest.

recent_dmesg() { # lines: the kernel log's tail (a wedged NIC says "TX timeout")
  dmesg | grep -v "speed is unknown" | tail -n "$1"
}

watch_ranks() {
  [[ -z ${1:-} ]] || tail -n +1 -F "$1" 2>/dev/null | sed -u 's/^/rank stderr: /' &
  local -A cpu=() since=() stalled_shown=() retransmit_shown=()
  local pid now stat fields ticks wchan line key dmesg_shown=0
  while sleep 5; do
    now=$SECONDS
    for pid in $(pgrep -x rdma_fabric); do
      read -r stat <"/proc/$pid/stat" 2>/dev/null || continue
      fields=(${stat##*) }) # from the state on: utime and stime are 11 and 12
      ticks=$((fields[11] + fields[12]))
      read -r wchan <"/proc/$pid/wchan" 2>/dev/null || true
      if [[ ${cpu[$pid]:-} != "$ticks" ]]; then
        cpu[$pid]=$ticks since[$pid]=$now
      elif ((now - since[$pid] >= 10)) && [[ -z ${stalled_shown[$pid]:-} ]]; then
        stalled_shown[$pid]=1
        echo "watch: $(date +%T) rdma_fabric $pid used no CPU for $((now - since[$pid])) s:" \
          "state ${fields[0]}, wchan $wchan"
        cat /proc/"$pid"/task/*/stack 2>/dev/null | sort | uniq -c | sort -rn | head -n 20
        timeout 120 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^(#|Thread)"
        ss -tnoi dst "$ASIO_RDMA_PEER_ADDR" 2>&1 | head -n 40
      fi
    done
    # Once per connection and retransmission count.
    while read -r line; do
      [[ $line =~ ([^ ]+\ +[^ ]+)\ +timer:\(on,[^,]*,([0-9]+)\) ]] || continue
      key="${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
      if ((BASH_REMATCH[2] >= 6)) && [[ -z ${retransmit_shown[$key]:-} ]]; then
        retransmit_shown[$key]=1
        echo "watch: $(date +%T) TCP retransmitting: $line"
        if ((!dmesg_shown)); then
          dmesg_shown=1
          recent_dmesg 8 | sed 's/^/watch: dmesg: /'
        fi
      fi
    done < <(ss -tnoH dst "$ASIO_RDMA_PEER_ADDR" 2>/dev/null)
  done
}

stop_watching() { # the watcher started with watch_ranks &, and what it started
  { pkill -P "$watcher" || true; kill "$watcher" || true; } 2>/dev/null
}
