#!/usr/bin/env bash
# Runs one example of examples/ against real RDMA (integration: the SoftRoCE
# VM or a local device) and checks what it does:
#   run_example.sh NAME EXAMPLES_DIR RDMA_ECHO
# ASIO_RDMA_TEST_ADDR is the device's address (test/vm/run.sh sets it).
set -uo pipefail
name=$1 dir=$2 rdma_echo=$3
addr=${ASIO_RDMA_TEST_ADDR:?ASIO_RDMA_TEST_ADDR is not set: run in test/vm/run.sh}
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $name: $*"
  echo "--- server output:"
  cat "$tmp/server.log"
  exit 1
}
# start_server READY_TEXT COMMAND...: runs COMMAND, waits for READY_TEXT in its output.
start_server() {
  local ready=$1
  shift
  "$@" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    grep -qF -- "$ready" "$tmp/server.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || fail "the server exited"
    sleep 0.1
  done
  fail "the server did not start"
}

case $name in
embedded_stats)
  start_server "statistics on TCP port" "$dir/embedded_stats" "$addr" 7601 7602
  "$rdma_echo" client "$addr" --port 7601 --count 100 --size 64 || fail "rdma_echo client failed"
  exec 3<>"/dev/tcp/$addr/7602" || fail "no TCP connection to the statistics port"
  line=$(head -n 1 <&3)
  echo "statistics: $line"
  [[ $line == "connections 1 active "[01]" messages 100 bytes 6400" ]] ||
    fail "unexpected statistics '$line'"
  ;;
callback_echo)
  start_server "listening on port" "$dir/callback_echo" server "$addr" 7603 secret
  "$dir/callback_echo" client "$addr" 7603 secret 20 >"$tmp/good.log" 2>&1 ||
    { cat "$tmp/good.log"; fail "the client with the right token failed"; }
  grep -qF "all echoes matched" "$tmp/good.log" || fail "no echoes"
  if "$dir/callback_echo" client "$addr" 7603 wrong 1 >"$tmp/bad.log" 2>&1; then
    fail "the client with a wrong token succeeded"
  fi
  grep -qF "connect failed" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no refusal reported"; }
  grep -qF "rejected" "$tmp/server.log" || fail "the server did not report the rejection"
  grep -qF "established" "$tmp/server.log" || fail "the server did not report the connection"
  ;;
threaded_echo)
  start_server "2 threads on ports 7604..7605" "$dir/threaded_echo" "$addr" 7604 2
  "$rdma_echo" client "$addr" --port 7604 --count 200 --size 1024 &
  first=$!
  "$rdma_echo" client "$addr" --port 7605 --count 200 --size 1024 || fail "client of thread 1 failed"
  wait $first || fail "client of thread 0 failed"
  grep -qF "thread 0: connection" "$tmp/server.log" || fail "thread 0 served nothing"
  grep -qF "thread 1: connection" "$tmp/server.log" || fail "thread 1 served nothing"
  ;;
kv_lookup)
  start_server "serving 3 entries" "$dir/kv_lookup" server "$addr" 7606 \
    alpha=first beta=second "gamma=third value"
  out=$("$dir/kv_lookup" client "$addr" 7606 beta gamma delta alpha 2>&1) ||
    fail "the client failed: $out"
  echo "$out"
  [[ $out == $'beta = second\ngamma = third value\ndelta: not found\nalpha = first' ]] ||
    fail "unexpected lookups"
  ;;
http_file_server)
  mkdir -p "$tmp/root"
  head -c 3000000 /dev/urandom >"$tmp/root/data.bin"
  start_server "serving" "$dir/http_file_server" serve "$addr" 7607 "$tmp/root"
  for kind in rdma tcp; do
    port=$([[ $kind == rdma ]] && echo 7607 || echo 7608)
    "$dir/http_file_server" get $kind "$addr" $port /data.bin >"$tmp/$kind.bin" 2>"$tmp/$kind.log" ||
      { cat "$tmp/$kind.log"; fail "GET over $kind failed"; }
    cmp -s "$tmp/$kind.bin" "$tmp/root/data.bin" || fail "the file that came over $kind differs"
    cat "$tmp/$kind.log"
  done
  if "$dir/http_file_server" get rdma "$addr" 7607 /missing >/dev/null 2>"$tmp/404.log"; then
    fail "a missing file was served"
  fi
  grep -qF "404" "$tmp/404.log" || { cat "$tmp/404.log"; fail "no 404 for a missing file"; }
  ;;
rpc_kv)
  # The same service over RDMA and over TCP (the endpoint is the only difference).
  for url in "rdma://$addr:7611" "tcp://$addr:7612"; do
    start_server "serving" "$dir/rpc_kv" server "$url"
    out=$("$dir/rpc_kv" client "$url" 8 2>&1) || fail "the client failed over $url: $out"
    echo "$url: $out"
    [[ $out == "101 values read back, 0 wrong, the 8 MiB one included; a missing key not found" ]] ||
      fail "unexpected output over $url: $out"
    kill -TERM "$server_pid" && wait "$server_pid" || fail "the server did not drain and exit 0"
    server_pid=
  done
  ;;
tls_echo)
  # A certificate for "tls-echo", made now, and another one the server does not have.
  for name in server other; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
      -subj "/CN=tls-echo" -addext "subjectAltName=DNS:tls-echo" \
      -keyout "$tmp/$name.key" -out "$tmp/$name.pem" 2>/dev/null || fail "openssl req failed"
  done
  start_server "listening on" "$dir/tls_echo" server "$addr" 7609 "$tmp/server.pem" "$tmp/server.key"
  out=$("$dir/tls_echo" client "$addr" 7609 "$tmp/server.pem" "hello" "over TLS on RDMA" 2>&1) ||
    fail "the client failed: $out"
  echo "$out"
  [[ $out == $'hello\nover TLS on RDMA' ]] || fail "unexpected echoes"
  if out=$("$dir/tls_echo" client "$addr" 7609 "$tmp/other.pem" "x" 2>&1); then
    fail "a client that trusts another certificate got through: $out"
  fi
  echo "with the wrong trust anchor: $out"
  [[ $out == *"certificate verify failed"* ]] || fail "no certificate verification failure"
  ;;
*)
  echo "unknown example $name"
  exit 2
  ;;
esac
echo "ok: $name"
