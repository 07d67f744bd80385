#!/bin/bash
# A short real run of every operation, bandwidth and latency, against the
# framework server and the raw-verbs server. Needs ASIO_RDMA_TEST_ADDR and
# ASIO_RDMA_DEVICE (set by test/vm/run.sh). Each server is waited for by its
# listening line. An operation the device lacks (iWARP: immediate data and
# datagrams; siw: atomics) must be refused with a message naming the device
# and what it lacks, and a non-zero exit status.
set -u
B=$1
A=${ASIO_RDMA_TEST_ADDR:?ASIO_RDMA_TEST_ADDR is not set: run through test/vm/run.sh}
D=${ASIO_RDMA_DEVICE:?ASIO_RDMA_DEVICE is not set: run through test/vm/run.sh}
info=$(ibv_devinfo -v -d "$D") || { echo "FAIL: ibv_devinfo -d $D"; exit 1; }
iwarp=0 atomics=1
grep -q 'transport:.*iWARP' <<<"$info" && iwarp=1
grep -q 'atomic_cap:.*ATOMIC_NONE' <<<"$info" && atomics=0
lacks() { # op: what the device lacks for it, as the refusal says ("" if nothing)
  case $1 in
  write_imm) ((iwarp)) && echo "immediate data" ;;
  fetch_add | compare_swap) ((atomics)) || echo "has no atomic operations" ;;
  ud_send) ((iwarp)) && echo "has no unreliable datagrams" ;;
  esac
  return 0
}
refused() { # label what command...: the command fails and names $D and what
  local label=$1 what=$2 out
  shift 2
  if out=$("$@" 2>&1); then
    echo "FAIL: $label succeeded on $D, which lacks $what:"
    echo "$out"
    fails=$((fails + 1))
  elif grep -q "$D.*$what" <<<"$out"; then
    echo "ok: $label refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL: $label: unclear refusal (expected $D and '$what'):"
    echo "$out"
    fails=$((fails + 1))
  fi
}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

start_server() { # port [--raw-verbs]
  "$B" server --bind "$A" --port "$@" >"$dir/server-$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q listening "$dir/server-$1.log" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: server on port $1 did not listen:"
  cat "$dir/server-$1.log"
  exit 1
}

# Each measuring run is short: what is checked is that it runs and reports, not its
# figures (a run's cost in the guest is mostly the program's start and the connection).
short=(--duration 0.15 --warmup 0.05)
fw=7460 raw=7461 # ports no other test uses (test/bench/CMakeLists.txt)
start_server $fw
start_server $raw --raw-verbs
fails=0
for impl in framework raw; do
  port=$fw extra=()
  [ $impl = raw ] && port=$raw extra=(--raw-verbs)
  for op in send write write_imm read fetch_add compare_swap; do
    size=4096
    case $op in fetch_add | compare_swap) size=8 ;; esac
    for mode in bw lat; do
      json=$dir/$impl-$op-$mode.json
      what=$(lacks $op)
      if [[ -n $what ]]; then
        refused "$impl $op $mode" "$what" timeout 120 "$B" client "$A" --port $port \
          "${extra[@]}" --op $op --mode $mode --size $size --depth 16 --duration 0.3
        continue
      fi
      if out=$(timeout 120 "$B" client "$A" --port $port "${extra[@]}" --op $op --mode $mode \
        --size $size --depth 16 "${short[@]}" --json "$json" 2>&1) &&
        grep -q '"iterations": [1-9]' "$json"; then
        echo "ok: $impl $op $mode: $(echo "$out" | tail -1)"
      else
        echo "FAIL: $impl $op $mode:"
        echo "$out"
        fails=$((fails + 1))
      fi
    done
  done
done
# A sweep with two connections, a bidirectional run and batches (async_batch) on the framework.
for args in "--sizes 64,4096 --connections 2" "--size 64 --connections 4 --shared-queues" \
  "--bidirectional --size 1024" "--op send --size 64 --batch 4" "--op write --size 4096 --batch 8" \
  "--op read --size 1024 --batch 8" "--mode lat --op send --size 64 --lat-send post" \
  "--mode lat --op write --size 64 --lat-send post" \
  "--mode lat --op write_imm --size 64 --lat-send post" \
  "--mode lat --op send --size 64 --send-completion ack" \
  "--mode lat --op send --size 8 --send-from copied" \
  "--mode lat --op send --size 64 --send-from copied --lat-send post" \
  "--op send --size 4096 --send-from copied" "--bidirectional --size 1024 --send-from copied" \
  "--op write --size 65536 --siw-zero-copy" "--op send --size 65536 --siw-zero-copy"; do
  if [[ $args == *write_imm* && -n $(lacks write_imm) ]]; then
    refused "$args" "$(lacks write_imm)" timeout 120 "$B" client "$A" --port $fw $args \
      --depth 8 --duration 0.3
    continue
  fi
  if out=$(timeout 120 "$B" client "$A" --port $fw $args --depth 8 "${short[@]}" 2>&1); then
    echo "ok: $args"
  else
    echo "FAIL: $args:"
    echo "$out"
    fails=$((fails + 1))
  fi
done
# --statistics: the client's connection statistics after the run.
if out=$(timeout 120 "$B" client "$A" --port $fw --op write --size 4096 --depth 8 \
  "${short[@]}" --statistics 2>&1) &&
  grep -q "^# statistics: posts [1-9][0-9]*, work requests [1-9]" <<<"$out"; then
  echo "ok: --statistics: $(grep '^# statistics' <<<"$out")"
else
  echo "FAIL: --statistics:"
  echo "$out"
  fails=$((fails + 1))
fi
# --asio-floor: the raw-verbs send ping-pong awaited through Asio at both ends, busy and
# with completion events, then a plain raw-verbs ping-pong: the server's awaited echo ends
# with its client (it serves one at a time and turns the next away while busy), and
# measured round trips come back.
for run in floor floor-event plain; do
  extra=()
  [ $run = floor ] && extra=(--asio-floor)
  [ $run = floor-event ] && extra=(--asio-floor --completion event)
  json=$dir/raw-floor.json
  rm -f "$json"
  if out=$(timeout 120 "$B" client "$A" --port $raw --raw-verbs "${extra[@]}" --mode lat \
    --op send --size 8 --iterations 2000 --warmup 0.05 --json "$json" 2>&1) &&
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
floor = sys.argv[2].startswith("floor")
sys.exit(d["parameters"]["asio_floor"] != floor or d["results"][0]["iterations"] < 2000 or
         not d["results"][0]["lat_p50_us"] > 0)' "$json" $run; then
    echo "ok: raw send lat ($run): $(echo "$out" | tail -1)"
  else
    echo "FAIL: raw send lat ($run):"
    echo "$out"
    cat "$dir/server-$raw.log"
    fails=$((fails + 1))
  fi
done
# --send-from copied: the client's sends are copied by the library and complete when
# posted, so far fewer of its work requests ask for a completion than it posts (each
# zero-copy send asks for one). Not on iWARP, where every send completes with its
# work completion (connection_options::send_completion).
if ((!iwarp)); then
  if out=$(timeout 120 "$B" client "$A" --port $fw --mode lat --op send --size 64 \
    --send-from copied --iterations 2000 --warmup 0.05 --statistics 2>&1) &&
    read -r requests signalled < <(sed -n 's/^# statistics: .*work requests \([0-9]*\), signalled \([0-9]*\).*/\1 \2/p' <<<"$out") &&
    ((requests >= 2000 && signalled * 4 < requests)); then
    echo "ok: --send-from copied: $(grep '^# statistics' <<<"$out")"
  else
    echo "FAIL: --send-from copied: its sends did not complete when posted:"
    echo "$out"
    fails=$((fails + 1))
  fi
fi
# Datagrams (ud_send, framework server only): bandwidth and latency, the
# server's count of arrivals in the JSON, and a size beyond the path MTU
# refused with a clear message.
if [[ -n $(lacks ud_send) ]]; then
  # No datagrams on this device: the client is refused, and the server said why it
  # serves none.
  for mode in bw lat; do
    refused "ud_send $mode" "$(lacks ud_send)" timeout 120 "$B" client "$A" --port $fw \
      --op ud_send --mode $mode --size 1024 --depth 16 --duration 0.3
  done
  if grep -q "no datagram server (ud_send): .*$D.*$(lacks ud_send)" "$dir/server-$fw.log"; then
    echo "ok: the server says why it serves no datagrams"
  else
    echo "FAIL: the server does not say why it serves no datagrams:"
    cat "$dir/server-$fw.log"
    fails=$((fails + 1))
  fi
else
  for _ in $(seq 100); do
    grep -q 'datagrams (ud_send)' "$dir/server-$fw.log" && break
    sleep 0.1
  done
  for mode in bw lat; do
    json=$dir/ud-$mode.json
    if out=$(timeout 120 "$B" client "$A" --port $fw --op ud_send --mode $mode --size 1024 \
      --depth 16 "${short[@]}" --json "$json" 2>&1) &&
      grep -q '"iterations": [1-9]' "$json" && grep -q '"datagrams_delivered": [1-9]' "$json"; then
      echo "ok: ud_send $mode: $(echo "$out" | tail -1)"
    else
      echo "FAIL: ud_send $mode:"
      echo "$out"
      cat "$dir/server-$fw.log"
      fails=$((fails + 1))
    fi
  done
  if out=$(timeout 60 "$B" client "$A" --port $fw --op ud_send --size 65536 --duration 0.3 2>&1); then
    echo "FAIL: ud_send of 64 KiB (beyond the path MTU) succeeded:"
    echo "$out"
    fails=$((fails + 1))
  elif grep -q 'larger than a datagram may be here: at most [0-9]* bytes (the path MTU' <<<"$out"; then
    echo "ok: ud_send beyond the MTU refused: $out"
  else
    echo "FAIL: ud_send beyond the MTU: unclear error:"
    echo "$out"
    fails=$((fails + 1))
  fi
fi
# The library's completion modes other than event (docs/rdma_bench.md).
for mode in busy adaptive; do
  if out=$(timeout 120 "$B" client "$A" --port $fw --completion $mode --size 64 --depth 8 \
    "${short[@]}" 2>&1) && grep -q "completion $mode" <<<"$out"; then
    echo "ok: --completion $mode"
  else
    echo "FAIL: --completion $mode:"
    echo "$out"
    fails=$((fails + 1))
  fi
done
exit $fails
