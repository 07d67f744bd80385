#!/bin/sh
# Bad rdma_echo and rdma_cp command lines: each must exit 2 and print its
# reason and where the usage is (CLI11: "Run 'NAME --help' for usage.").
# Usage: usage_errors.sh RDMA_ECHO RDMA_CP
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
    ! printf '%s' "$out" | grep -qF "Run '$name --help' for usage."; then
    echo "FAIL: $name $* -> status $rc, wanted 2 and '$want' and the pointer to --help:"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: $name $* -> $want"
  fi
}
expect "$ECHO" "rdma_echo: A subcommand is required"
expect "$ECHO" "rdma_echo: A subcommand is required" foo
expect "$ECHO" "rdma_echo: HOST is required" client
expect "$ECHO" "--port: 0 is out of range [1, 65535]" client h --port 0
expect "$ECHO" "--size: 'big' is not a number" client h --size big
expect "$ECHO" "--depth: 1 required N missing" client h --depth
expect "$ECHO" "not expected: 5 --count" server --count 5
expect "$CP" "rdma_cp: A subcommand is required"
expect "$CP" "rdma_cp: A subcommand is required" recv
expect "$CP" "rdma_cp: PATH is required" send h
expect "$CP" "rdma_cp: --dir is required" serve
expect "$CP" "--depth: 0 is out of range [1, 256]" send h f --depth 0
expect "$CP" "not expected: --bogus" serve --dir /tmp --bogus
expect "$CP" "port: 99999 is out of range [1, 65535]" send h:99999 f
expect "$CP" "--disk-threads: 65 is out of range [0, 64]" serve --dir /tmp --disk-threads 65
expect "$CP" "--resume-max-age: 'soon' is not a number" serve --dir /tmp --resume-max-age soon
expect "$CP" "--overwrite: 'sometimes' is not one of refuse, replace, keep-both" serve --dir /tmp --overwrite sometimes
expect "$CP" "--max-file-size: 'huge' is not a number" serve --dir /tmp --max-file-size huge
expect "$CP" "--max-connections-per-peer: 'x' is not a number" serve --dir /tmp --max-connections-per-peer x
expect "$CP" "--max-files-per-peer: 2000000 is out of range [0, 1048576]" serve --dir /tmp --max-files-per-peer 2000000
expect "$CP" "not expected: --no-fsync" send h f --no-fsync
exit $fails
