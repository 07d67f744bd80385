#!/bin/bash
# rdma_cp end to end on the device under test (ASIO_RDMA_TEST_ADDR, set by
# test/vm/run.sh): serve and send a file and a tree, their output, the copies
# and the exit statuses; --once; a missing path; no server; a missing
# directory to serve; the receiver's policies (--overwrite, --max-file-size,
# the per-peer limits, --no-fsync); a receive directory on another filesystem
# (SHARED_DIR: the build tree, a 9p share without RENAME_NOREPLACE in the
# SoftRoCE VM, like NFS). Usage: rdma_cp.sh RDMA_CP [SHARED_DIR]
set -u
B=$1
shared=${2:-}
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

start_server() { # port dir [args...]: waits for its "port" line
  local port=$1 into=$2
  shift 2
  "$B" serve --dir "$into" --bind "$A" --port "$port" "$@" >"$dir/server-$port.out" \
    2>"$dir/server-$port.err" &
  pids+=($!)
  for _ in $(seq 300); do
    grep -q "^rdma_cp: port $port" "$dir/server-$port.out" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: server on port $port did not start:"
  cat "$dir/server-$port.out" "$dir/server-$port.err"
  exit 1
}

src=$dir/src
dst=$dir/dst
mkdir -p "$src/t/a/b" "$src/t/empty" "$dst"
head -c 300000 /dev/urandom >"$src/one.bin"
head -c 70000 /dev/urandom >"$src/t/a/b/deep.bin"
head -c 5 /dev/urandom >"$src/t/top.txt"
: >"$src/t/a/zero"

start_server 7493 "$dst"
server=${pids[-1]}
if grep -q "^rdma_cp: serving $dst on $A" "$dir/server-7493.out"; then
  echo "ok: server banner"
else
  fail "server banner: $(cat "$dir/server-7493.out")"
fi

# A file and a tree in one go: t, t/a, t/a/b, t/empty + 4 files = 8 entries.
out=$(timeout 120 "$B" send "$A:7493" "$src/one.bin" "$src/t" --buffer-size 64k 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "^rdma_cp: sent 8 entries, 370005 bytes in .* chunk 65536" <<<"$out"; then
  echo "ok: send: $out"
else
  fail "send: status $rc: $out"
fi
if cmp -s "$src/one.bin" "$dst/one.bin" && diff -r "$src/t" "$dst/t" >/dev/null &&
  [ -d "$dst/t/empty" ] && [ -z "$(find "$dst" -name '*.part')" ]; then
  echo "ok: the copies are identical, no temporary left"
else
  fail "copies differ: $(diff -r "$src" "$dst" 2>&1 | head -5)"
fi
for _ in $(seq 100); do
  grep -q "^rdma_cp: from " "$dir/server-7493.out" && break
  sleep 0.1
done
if grep -q "^rdma_cp: received one.bin (300000 bytes)" "$dir/server-7493.out" &&
  grep -q "^rdma_cp: received t/a/b/deep.bin (70000 bytes)" "$dir/server-7493.out" &&
  grep -q "^rdma_cp: received t/empty/ (0 bytes)" "$dir/server-7493.out" &&
  grep -q "^rdma_cp: from .*: 8 entries, 370005 bytes" "$dir/server-7493.out"; then
  echo "ok: server reported every entry and the connection"
else
  fail "server output: $(cat "$dir/server-7493.out" "$dir/server-7493.err")"
fi

# A missing path: a clear error before connecting, status 1.
out=$(timeout 60 "$B" send "$A:7493" "$src/nope" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "nope: No such file or directory" <<<"$out"; then
  echo "ok: missing path: $out"
else
  fail "missing path: status $rc: $out"
fi

# No server on that port: status 1, refused.
out=$(timeout 60 "$B" send "$A:7499" "$src/one.bin" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -qi "refused" <<<"$out"; then
  echo "ok: no server: $out"
else
  fail "no server: status $rc: $out"
fi

# A directory to serve that does not exist, or that cannot store files (a
# read-only filesystem): status 2 at start, before any sender, saying why.
refused_at_start() { # what directory "step: error"
  local what=$1 into=$2 why=$3 out rc
  out=$(timeout 60 "$B" serve --dir "$into" --bind "$A" --port 7494 2>&1)
  rc=$?
  if [ $rc -eq 2 ] && grep -qxF "rdma_cp: cannot store files in $into: $why" <<<"$out"; then
    echo "ok: $what: $out"
  else
    fail "$what: status $rc: $out"
  fi
}
refused_at_start "missing directory" "$dir/absent" "open the directory: No such file or directory"
mkdir "$dir/readonly"
if mount -t tmpfs -o ro,size=1m tmpfs "$dir/readonly"; then
  refused_at_start "read-only directory" "$dir/readonly" "create a file: Read-only file system"
  umount "$dir/readonly"
else
  fail "cannot mount a read-only tmpfs"
fi

# --once: the server ends by itself after one connection, status 0.
mkdir "$dir/once"
start_server 7495 "$dir/once" --once
once=${pids[-1]}
out=$(timeout 120 "$B" send "$A:7495" "$src/one.bin" 2>&1) || fail "send to --once: $out"
if timeout 30 tail --pid="$once" -f /dev/null; then
  wait "$once"
  rc=$?
  if [ $rc -eq 0 ] && cmp -s "$src/one.bin" "$dir/once/one.bin"; then
    echo "ok: --once served one connection and exited 0"
  else
    fail "--once: status $rc"
  fi
else
  fail "--once: the server did not exit after its connection"
fi

# --secret-file: a server without one warns; with one, only senders that
# know the secret can write, and the others get "authentication failed".
if grep -q "WARNING: serving without --secret-file" "$dir/server-7493.err"; then
  echo "ok: a server without a secret warns"
else
  fail "no warning without a secret: $(cat "$dir/server-7493.err")"
fi
mkdir "$dir/auth"
echo "s3cret words" >"$dir/secret"
echo "other words" >"$dir/wrong"
start_server 7496 "$dir/auth" --secret-file "$dir/secret"
grep -q "WARNING" "$dir/server-7496.err" && fail "warning with a secret"
for who in wrong none; do
  if [ $who = wrong ]; then opt=(--secret-file "$dir/wrong"); else opt=(); fi
  out=$(timeout 60 "$B" send "$A:7496" "$src/one.bin" "${opt[@]}" 2>&1)
  rc=$?
  if [ $rc -eq 1 ] && grep -q "authentication failed" <<<"$out" && [ -z "$(ls -A "$dir/auth")" ]; then
    echo "ok: $who secret refused: $out"
  else
    fail "$who secret: status $rc: $out; $(ls -A "$dir/auth")"
  fi
done
out=$(timeout 60 "$B" send "$A:7496" "$src/one.bin" --secret-file "$dir/secret" 2>&1)
if [ $? -eq 0 ] && cmp -s "$src/one.bin" "$dir/auth/one.bin"; then
  echo "ok: the right secret is accepted: $out"
else
  fail "right secret: $out"
fi
if grep -q "authentication failed" "$dir/server-7496.err"; then
  echo "ok: the server reported: $(grep -m1 'authentication failed' "$dir/server-7496.err")"
else
  fail "server did not report the failed authentication: $(cat "$dir/server-7496.err")"
fi
kill -TERM "${pids[-1]}"

# Progress: a bar redrawn in place (\r) with rate and ETA under a real
# pseudo-terminal (script(1) gives rdma_cp one), plain lines without \r when
# stderr is a file; --json prints one JSON summary on stdout.
head -c $((6 * 1024 * 1024)) /dev/urandom >"$src/progress.bin"
script -qefc "$B send $A:7493 $src/progress.bin --buffer-size 64k" /dev/null </dev/null \
  >"$dir/pty.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q $'\r\[' "$dir/pty.out" && grep -q '100% 6.0 MiB / 6.0 MiB .*/s  ETA 0:00' "$dir/pty.out" &&
  grep -q "^rdma_cp: sent 1 entries, 6291456 bytes" "$dir/pty.out"; then
  echo "ok: a terminal gets a progress bar: $(tr '\r' '\n' <"$dir/pty.out" | grep -c '^\[') redraws," \
    "last: $(tr '\r' '\n' <"$dir/pty.out" | grep '^\[' | tail -1)"
else
  fail "progress bar under a pty: status $rc: $(od -c "$dir/pty.out" | tail -5)"
fi
cp "$src/progress.bin" "$src/progress2.bin"
timeout 120 "$B" send "$A:7493" "$src/progress2.bin" --buffer-size 64k --json >"$dir/json.out" \
  2>"$dir/lines.err"
rc=$?
if [ $rc -eq 0 ] && ! grep -q $'\r' "$dir/lines.err" &&
  grep -Eq '^rdma_cp: progress 6291456/6291456 bytes \(100%\), .*/s, ETA 0:00$' "$dir/lines.err"; then
  echo "ok: no terminal, plain lines: $(tr '\n' ';' <"$dir/lines.err")"
else
  fail "progress lines: status $rc: $(cat "$dir/lines.err")"
fi
if python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["status"] == "ok" and j["files"] == 1 and j["bytes"] == 6291456, j
assert j["chunk_size"] == 65536 and j["seconds"] > 0 and j["bytes_per_second"] > 0, j
' "$dir/json.out"; then
  echo "ok: --json: $(cat "$dir/json.out")"
else
  fail "--json: $(cat "$dir/json.out")"
fi

# Errors say what happened. No space: a 1 MiB tmpfs gets a 2 MiB file.
mkdir "$dir/small"
if mount -t tmpfs -o size=1m tmpfs "$dir/small"; then
  start_server 7497 "$dir/small"
  out=$(timeout 60 "$B" send "$A:7497" "$src/progress.bin" --json 2>"$dir/nospace.err")
  rc=$?
  if [ $rc -eq 1 ] && grep -q "progress.bin: no space on receiver" "$dir/nospace.err" &&
    grep -q '"status":"error","error":"no space on receiver"' <<<"$out"; then
    echo "ok: no space: $(cat "$dir/nospace.err"); $out"
  else
    fail "no space: status $rc: $(cat "$dir/nospace.err"); $out"
  fi
  kill -TERM "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null
  umount "$dir/small"
else
  fail "cannot mount a tmpfs for the no-space case"
fi
# The receiver killed in the middle of a file: exit status 1 and an error
# that names the file, no hang.
mkdir "$dir/killed"
head -c $((40 * 1024 * 1024)) /dev/urandom >"$src/long.bin"
start_server 7498 "$dir/killed"
victim=${pids[-1]}
"$B" send "$A:7498" "$src/long.bin" --buffer-size 64k --depth 1 --no-progress --timeout 60 \
  >"$dir/killed.out" 2>&1 &
sender=$!
for _ in $(seq 600); do # until the receiver holds some data
  part=$(find "$dir/killed" -name '*.part' -size +256k | head -1)
  [ -n "$part" ] && break
  sleep 0.05
done
kill -KILL "$victim"
wait "$sender"
rc=$?
# Which error the sender sees depends on the order in which the dying
# receiver's kernel tears down its resources: the disconnect first ("closed
# the connection"), or its memory region first, so that a write in flight is
# refused ("refused an RDMA access"). Both are the truth and name the file.
if [ $rc -eq 1 ] && grep -Eq "long.bin: receiver (closed the connection|refused an RDMA access)" "$dir/killed.out"; then
  echo "ok: receiver killed mid-file: $(cat "$dir/killed.out")"
else
  fail "receiver killed mid-file: status $rc, part '$part': $(cat "$dir/killed.out")"
fi

# --resume: the sender SIGKILLed in the middle of a file; the receiver keeps
# what arrived (NAME.<key>.resume.part), and a second `send --resume` sends
# only the rest: the copy is byte-identical and --json reports the bytes.
mkdir "$dir/resume"
start_server 7500 "$dir/resume"
size=$((40 * 1024 * 1024))
# (rdma_cp itself in the background, not under timeout(1): the signal must
# reach it.)
"$B" send "$A:7500" "$src/long.bin" --resume --buffer-size 64k --depth 1 --timeout 60 \
  --no-progress >"$dir/resume1.out" 2>&1 &
sender=$!
for _ in $(seq 600); do
  part=$(find "$dir/resume" -name 'long.bin.*.resume.part' -size +2M | head -1)
  [ -n "$part" ] && break
  sleep 0.05
done
kill -KILL "$sender"
wait "$sender" 2>/dev/null
for _ in $(seq 200); do # the server notices the lost connection (the kernel disconnects)
  grep -q "connection from .* failed" "$dir/server-7500.err" && break
  sleep 0.05
done
kept=$(find "$dir/resume" -name 'long.bin.*.resume.part' -printf '%s\n' | head -1)
if [ -n "$part" ] && [ -n "$kept" ] && [ "$kept" -gt 0 ] && [ "$kept" -lt $size ] &&
  [ ! -e "$dir/resume/long.bin" ]; then
  echo "ok: sender killed after $kept bytes on the receiver, kept as $(basename "$part")"
else
  fail "kill mid-file: part '$part', kept '$kept': $(ls -l "$dir/resume")"
fi
out=$(timeout 120 "$B" send "$A:7500" "$src/long.bin" --resume --buffer-size 64k --json \
  2>"$dir/resume2.err")
rc=$?
if [ $rc -eq 0 ] && cmp -s "$src/long.bin" "$dir/resume/long.bin" &&
  [ -z "$(find "$dir/resume" -name '*.part')" ] && python3 -c '
import json, sys
j = json.loads(sys.argv[1])
size, kept = int(sys.argv[2]), int(sys.argv[3])
assert j["status"] == "ok" and j["bytes"] == size, j
assert j["bytes_resumed"] == kept and j["bytes_sent"] == size - kept < size, j
' "$out" $size "$kept"; then
  echo "ok: resumed, byte-identical: $out"
else
  fail "resume: status $rc: $out $(cat "$dir/resume2.err"); $(ls -l "$dir/resume")"
fi

stop_server() { # the last started server
  kill -TERM "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null
}

# The receiver's policies from the command line. Default: an existing name
# is refused and stays as it was; the banner says what is in force.
mkdir "$dir/pol"
printf old >"$dir/pol/one.bin"
start_server 7480 "$dir/pol"
if grep -q "^rdma_cp: policies: overwrite refuse, fsync on, max file size none, per peer 16 connections and 8 files at once$" "$dir/server-7480.out"; then
  echo "ok: default policies in the banner"
else
  fail "policies banner: $(cat "$dir/server-7480.out")"
fi
out=$(timeout 60 "$B" send "$A:7480" "$src/one.bin" --no-progress 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "one.bin: file exists on receiver" <<<"$out" &&
  [ "$(cat "$dir/pol/one.bin")" = old ]; then
  echo "ok: --overwrite refuse (default): $out"
else
  fail "overwrite refuse: status $rc: $out"
fi
stop_server
# keep-both, --no-fsync, --max-file-size.
start_server 7481 "$dir/pol" --overwrite keep-both --no-fsync --max-file-size 400k
if grep -q "^rdma_cp: policies: overwrite keep-both, fsync off, max file size 409600," "$dir/server-7481.out"; then
  echo "ok: keep-both, no fsync, 400k in the banner"
else
  fail "policies banner: $(cat "$dir/server-7481.out")"
fi
out=$(timeout 60 "$B" send "$A:7481" "$src/one.bin" --no-progress 2>&1)
rc=$?
if [ $rc -eq 0 ] && cmp -s "$src/one.bin" "$dir/pol/one.1.bin" && [ "$(cat "$dir/pol/one.bin")" = old ]; then
  echo "ok: --overwrite keep-both stored one.1.bin"
else
  fail "overwrite keep-both: status $rc: $out; $(ls "$dir/pol")"
fi
out=$(timeout 60 "$B" send "$A:7481" "$src/progress.bin" --no-progress 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "progress.bin: file larger than the receiver's maximum file size" <<<"$out" &&
  [ ! -e "$dir/pol/progress.bin" ]; then
  echo "ok: --max-file-size: $out"
else
  fail "max file size: status $rc: $out"
fi
stop_server
start_server 7482 "$dir/pol" --overwrite replace
out=$(timeout 60 "$B" send "$A:7482" "$src/one.bin" --no-progress 2>&1)
rc=$?
if [ $rc -eq 0 ] && cmp -s "$src/one.bin" "$dir/pol/one.bin" && [ -z "$(find "$dir/pol" -name '*.part')" ]; then
  echo "ok: --overwrite replace"
else
  fail "overwrite replace: status $rc: $out"
fi
stop_server

# Per-peer limits: a slow sender (4 KiB chunks, one in flight) holds a
# connection and a file; a second sender from the same address is refused.
per_peer_limit() { # port option what
  local port=$1 option=$2 what=$3
  mkdir -p "$dir/limit$port"
  start_server "$port" "$dir/limit$port" "$option" 1
  "$B" send "$A:$port" "$src/long.bin" --buffer-size 4k --depth 1 --no-progress \
    >"$dir/slow$port.out" 2>&1 &
  local slow=$!
  local part=
  for _ in $(seq 600); do
    part=$(find "$dir/limit$port" -name 'long.bin.*.part' | head -1)
    [ -n "$part" ] && break
    sleep 0.05
  done
  out=$(timeout 60 "$B" send "$A:$port" "$src/one.bin" --no-progress 2>&1)
  rc=$?
  kill -KILL "$slow"
  wait "$slow" 2>/dev/null
  if [ -n "$part" ] && [ $rc -eq 1 ] && grep -q "too many connections or files in flight from this peer" <<<"$out" &&
    [ ! -e "$dir/limit$port/one.bin" ]; then
    echo "ok: $option 1 refused a second $what: $out"
  else
    fail "$option: part '$part', status $rc: $out"
  fi
  stop_server
}
per_peer_limit 7483 --max-connections-per-peer connection
per_peer_limit 7484 --max-files-per-peer file

# A receive directory on another filesystem: the build tree, a 9p share in
# the SoftRoCE VM, which (like NFS and CIFS) refuses RENAME_NOREPLACE. The
# server says which commit it uses; files, trees and the refusal of an
# existing name work as on tmpfs.
if [ -n "$shared" ]; then
  sdir=$(mktemp -d "$shared/rdma_cp_store.XXXXXX")
  # (findmnt: statfs on 9p reports the host filesystem's type.)
  fstype=$(findmnt -n -o FSTYPE -T "$sdir")
  start_server 7485 "$sdir"
  if [ "$fstype" = 9p ] || [ "$fstype" = nfs ] || [ "$fstype" = nfs4 ]; then
    want="link() and unlink()"
  else
    want="renameat2(RENAME_NOREPLACE)"
  fi
  if grep -qF "rdma_cp: files are committed by $want" "$dir/server-7485.out"; then
    echo "ok: $fstype: committed by $want"
  else
    fail "$fstype commit method: $(cat "$dir/server-7485.out")"
  fi
  out=$(timeout 120 "$B" send "$A:7485" "$src/one.bin" "$src/t" --no-progress 2>&1)
  rc=$?
  if [ $rc -eq 0 ] && cmp -s "$src/one.bin" "$sdir/one.bin" && diff -r "$src/t" "$sdir/t" >/dev/null &&
    [ -z "$(find "$sdir" -name '*.part')" ]; then
    echo "ok: $fstype: a file and a tree stored"
  else
    fail "$fstype: status $rc: $out; $(cat "$dir/server-7485.err")"
  fi
  out=$(timeout 60 "$B" send "$A:7485" "$src/one.bin" --no-progress 2>&1)
  rc=$?
  if [ $rc -eq 1 ] && grep -q "one.bin: file exists on receiver" <<<"$out" &&
    cmp -s "$src/one.bin" "$sdir/one.bin" && [ -z "$(find "$sdir" -name '*.part')" ]; then
    echo "ok: $fstype: an existing name refused"
  else
    fail "$fstype: existing name: status $rc: $out"
  fi
  stop_server
  rm -rf "$sdir"
else
  fail "no SHARED_DIR given: the receive directory on another filesystem is not tested"
fi

# SIGTERM stops the server (status 0).
kill -TERM "$server"
wait "$server"
rc=$?
if [ $rc -eq 0 ]; then
  echo "ok: server stopped by SIGTERM"
else
  fail "server exit status after SIGTERM: $rc"
fi
exit $fails
