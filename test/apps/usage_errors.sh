#!/bin/sh
# Bad rdma_echo and rdma_cp command lines: each must exit 2 and print its
# reason and the usage. Usage: usage_errors.sh RDMA_ECHO RDMA_CP
ECHO=$1
CP=$2
fails=0
expect() { # expect PROGRAM "reason fragment" ARGS...
  program=$1
  want=$2
  shift 2
  out=$("$program" "$@" 2>&1)
  rc=$?
  name=$(basename "$program")
  if [ $rc -ne 2 ] || ! printf '%s' "$out" | grep -qF -- "$want" ||
    ! printf '%s' "$out" | grep -q "^usage: $name"; then
    echo "FAIL: $name $* -> status $rc, wanted 2 and '$want' and the usage:"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: $name $* -> $want"
  fi
}
expect "$ECHO" "missing mode (server or client)"
expect "$ECHO" "unknown mode 'foo'" foo
expect "$ECHO" "client needs a HOST" client
expect "$ECHO" "--port: 0 is out of range [1, 65535]" client h --port 0
expect "$ECHO" "--size: 'big' is not a number" client h --size big
expect "$ECHO" "--depth needs a value" client h --depth
expect "$ECHO" "unexpected argument '--count'" server --count 5
expect "$CP" "missing mode (serve or send)"
expect "$CP" "unknown mode 'recv'" recv
expect "$CP" "send needs HOST[:PORT] and at least one PATH" send h
expect "$CP" "serve needs --dir DIR" serve
expect "$CP" "--depth: 0 is out of range [1, 256]" send h f --depth 0
expect "$CP" "unexpected option '--bogus'" serve --dir /tmp --bogus
expect "$CP" "port: 99999 is out of range [1, 65535]" send h:99999 f
exit $fails
