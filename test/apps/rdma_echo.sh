#!/bin/bash
# rdma_echo end to end on the device under test (ASIO_RDMA_TEST_ADDR, set by
# test/vm/run.sh): a server and a verifying client, their output and exit
# status; a client without a server; a client whose messages the server
# cannot take. Usage: rdma_echo.sh RDMA_ECHO
set -u
B=$1
A=${ASIO_RDMA_TEST_ADDR:?ASIO_RDMA_TEST_ADDR is not set: run through test/vm/run.sh}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

start_server() { # port [args...]: waits for its "listening" line
  local port=$1
  shift
  "$B" server --bind "$A" --port "$port" "$@" >"$dir/server-$port.out" 2>"$dir/server-$port.err" &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q "listening on $A:$port" "$dir/server-$port.out" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: server on port $port did not listen:"
  cat "$dir/server-$port.out" "$dir/server-$port.err"
  exit 1
}

start_server 7491
server=${pids[-1]}

# A good run: every message echoed and verified, a summary, status 0.
out=$(timeout 120 "$B" client "$A" --port 7491 --count 300 --size 1000 --depth 4 2>&1)
rc=$?
if [ $rc -eq 0 ] &&
  grep -q "^rdma_echo: 300 messages of 1000 bytes echoed, 300 verified, 0 mismatched" <<<"$out"; then
  echo "ok: client: $out"
else
  fail "client: status $rc: $out"
fi
# Empty messages too.
out=$(timeout 120 "$B" client "$A" --port 7491 --count 20 --size 0 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "20 messages of 0 bytes echoed, 20 verified, 0 mismatched" <<<"$out"; then
  echo "ok: empty messages: $out"
else
  fail "empty messages: status $rc: $out"
fi
# The server reports each session.
for _ in $(seq 100); do
  [ "$(grep -c 'disconnected after' "$dir/server-7491.out")" -ge 2 ] && break
  sleep 0.1
done
if grep -q "disconnected after 300 messages" "$dir/server-7491.out" &&
  grep -q "disconnected after 20 messages" "$dir/server-7491.out"; then
  echo "ok: server saw both sessions"
else
  fail "server output: $(cat "$dir/server-7491.out" "$dir/server-7491.err")"
fi

# No server on that port: a clear error, status 1.
out=$(timeout 60 "$B" client "$A" --port 7499 --count 1 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -qi "refused" <<<"$out"; then
  echo "ok: no server: $out"
else
  fail "no server: status $rc, wanted 1 and 'refused': $out"
fi

# Messages larger than the server's buffers: the connection fails, status 1.
start_server 7492 --max-size 1024
out=$(timeout 60 "$B" client "$A" --port 7492 --count 5 --size 4096 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "^rdma_echo: " <<<"$out"; then
  echo "ok: too large for the server: $(tail -1 <<<"$out")"
else
  fail "too large for the server: status $rc, wanted 1 and an error: $out"
fi

# SIGTERM stops the server cleanly (status 0).
kill -TERM "$server"
wait "$server"
rc=$?
if [ $rc -eq 0 ]; then
  echo "ok: server stopped by SIGTERM"
else
  fail "server exit status after SIGTERM: $rc"
fi
exit $fails
