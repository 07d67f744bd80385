#!/bin/sh
# Bad rdma_bench command lines: each must exit 2 and print its reason and the usage.
B=$1
fails=0
expect() { # expect "reason fragment" ARGS...
  want=$1
  shift
  out=$("$B" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || ! printf '%s' "$out" | grep -qF -- "$want" ||
    ! printf '%s' "$out" | grep -q '^usage: rdma_bench'; then
    echo "FAIL: rdma_bench $* -> status $rc, wanted 2 and '$want' and the usage:"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: rdma_bench $* -> $want"
  fi
}
expect "missing role"
expect "unknown role 'serve'" serve
expect "client needs a HOST" client
expect "unexpected argument '--bogus'" client h --bogus
expect "--op: unknown operation 'rite'" client h --op rite
expect "--size: 'big' is not a number" client h --size big
expect "--depth: 0 is out of range" client h --depth 0
expect "--duration: 'x' is not a number of seconds" client h --duration x
expect "--port needs a value" client h --port
expect "fetch_add works on 8 bytes" client h --op fetch_add --size 64
expect "--bidirectional applies to send bandwidth only" client h --op write --bidirectional
expect "--completion: 'spin' is not event, busy or adaptive" client h --completion spin
expect "unexpected server argument '--size'" server --size 8
"$B" --help | grep -q '^usage: rdma_bench' || { echo "FAIL: --help"; fails=$((fails + 1)); }
exit $fails
