#!/bin/sh
# Bad rdma_bench command lines: each must exit 2 and print its reason and
# where the usage is; --help (also of a subcommand) prints it and exits 0.
B=$1
fails=0
expect() { # expect "reason fragment" ARGS...
  want=$1
  shift
  out=$("$B" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! printf '%s' "$out" | grep -qF -- "$want" ||
    ! printf '%s' "$out" | grep -qF "Run 'rdma_bench --help' for usage."; then
    echo "FAIL: rdma_bench $* -> status $rc, wanted 2 and '$want' and the --help hint:"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: rdma_bench $* -> $want"
  fi
}
help() { # help "first usage line" ARGS...
  want=$1
  shift
  out=$("$B" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -qF -- "$want"; then
    echo "FAIL: rdma_bench $* -> status $rc, wanted 0 and '$want':"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: rdma_bench $* -> $want"
  fi
}
expect "A subcommand is required"
expect "A subcommand is required" serve
expect "HOST is required" client
expect "not expected: --bogus" client h --bogus
expect "--op: unknown operation 'rite'" client h --op rite
expect "--size: 'big' is not a number" client h --size big
expect "--depth: 0 is out of range" client h --depth 0
expect "--duration: 'x' is not a number of seconds" client h --duration x
expect "--port: 1 required" client h --port
expect "fetch_add works on 8 bytes" client h --op fetch_add --size 64
expect "--bidirectional applies to send bandwidth only" client h --op write --bidirectional
expect "--completion: 'spin' is not event, busy or adaptive" client h --completion spin
expect "not expected: 8 --size" server --size 8
expect "--raw-verbs does not run ud_send" client h --raw-verbs --op ud_send --size 64
expect "ud_send runs one datagram socket" client h --op ud_send --connections 2
help "Usage: rdma_bench [OPTIONS] SUBCOMMAND" --help
help "Usage: rdma_bench client [OPTIONS] HOST" client --help
help "Usage: rdma_bench server [OPTIONS]" server --help
exit $fails
