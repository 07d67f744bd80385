#!/usr/bin/env bash
# Received files on a real NFS mount (test/vm/two_hosts runs this in both
# guests). NFS, like CIFS and 9p, refuses RENAME_NOREPLACE, so the receiver
# commits by link + unlink there (docs/file_transfer.md, "Filesystems").
#   Host A exports a tmpfs over NFSv4.2 (the kernel's nfsd).
#   Host B mounts it, then
#   1. runs the file transfer integration suite with its directories on the
#      mount (ASIO_RDMA_FT_ROOT): same-name races, overwrite policies,
#      resume, refusal cleanup, the commit method, with the same assertions
#      as on tmpfs;
#   2. serves a directory on the mount with rdma_cp, which host A sends to
#      across the wire: a file and a tree are stored, an existing name is
#      refused, nothing temporary is left.
# Usage: nfs_two_hosts.sh RDMA_CP INTEGRATION_FILE_TRANSFER
set -euo pipefail
rdma_cp=$1
suite=$2
export_dir=/tmp/nfs-export
mnt=/tmp/nfs
port=7700

source "$(dirname "$0")/host_do.sh" # (copied beside this script by CMake)
# Modules beyond the guest's boot set, from its kernel package.
load() { modprobe -d "${ASIO_RDMA_VM_KERNEL_DIR:?not in the SoftRoCE VM}" "$@"; }
say() { echo "nfs_two_hosts($ASIO_RDMA_HOST): $*"; }
# The same bytes on both hosts without sharing a file: a counted pattern.
make_file() { # path bytes
  mkdir -p "$(dirname "$1")"
  { seq 1 1000000 || true; } | head -c "$2" >"$1" # seq ends on SIGPIPE
}

# A host that fails before the end releases the other (a killed guest
# counts as done), instead of leaving it at a barrier until the timeout.
other=$([[ $ASIO_RDMA_HOST == A ]] && echo B || echo A)
finished=0
trap '[[ $finished == 1 ]] || host_do kill $other || true' EXIT

fails=0
fail() {
  say "FAIL: $*"
  fails=$((fails + 1))
}

if [[ $ASIO_RDMA_HOST == A ]]; then
  load nfsd
  mkdir -p "$export_dir"
  mount -t tmpfs -o size=512m tmpfs "$export_dir"
  chmod 1777 "$export_dir"
  mount -t nfsd nfsd /proc/fs/nfsd
  # The guest's root is read-only: nfs-utils keep their state in a tmpfs.
  mount -t tmpfs tmpfs /var/lib/nfs
  mkdir -p /var/lib/nfs/v4recovery /run/rpcbind
  touch /var/lib/nfs/etab /var/lib/nfs/rmtab
  # Shortest lease and grace the kernel allows: a fresh server refuses new
  # opens for its grace period.
  echo 10 >/proc/fs/nfsd/nfsv4leasetime
  echo 10 >/proc/fs/nfsd/nfsv4gracetime
  rpcbind -w
  exportfs -o rw,sync,no_root_squash,no_subtree_check,insecure,fsid=0 "192.0.2.0/24:$export_dir"
  rpc.mountd
  rpc.nfsd 4
  started=$(date +%s)
  say "nfsd up: $(cat /proc/fs/nfsd/versions)"
  # Out of the grace period before B's first open.
  sleep $((12 - ($(date +%s) - started)))
  host_do barrier nfs-up
  src=/tmp/src
  make_file "$src/one.bin" 300000
  make_file "$src/t/a/b/deep.bin" 70000
  make_file "$src/t/top.txt" 5
  mkdir -p "$src/t/empty"
  host_do barrier receiver-up
  out=$("$rdma_cp" send "$ASIO_RDMA_PEER_ADDR:$port" "$src/one.bin" "$src/t" --no-progress 2>&1) ||
    fail "send to the NFS receiver: $out"
  say "$out"
  if out=$("$rdma_cp" send "$ASIO_RDMA_PEER_ADDR:$port" "$src/one.bin" --no-progress 2>&1); then
    fail "an existing name on NFS was not refused: $out"
  elif grep -q "one.bin: file exists on receiver" <<<"$out"; then
    say "ok: an existing name refused: $out"
  else
    fail "existing name: $out"
  fi
  host_do barrier sent
  host_do barrier done
  finished=1
  exit $fails
fi

host_do barrier nfs-up
load nfsv4
mkdir -p "$mnt"
mount -t nfs4 -o vers=4.2,hard,timeo=100 "192.0.2.1:/" "$mnt"
say "mounted: $(findmnt -n -o SOURCE,FSTYPE,OPTIONS -T "$mnt" | cut -c1-120)"
[[ $(findmnt -n -o FSTYPE -T "$mnt") == nfs4 ]] || fail "$mnt is not an NFS mount"

# 1. The suite, every directory on NFS.
if ASIO_RDMA_FT_ROOT=$mnt/suite "$suite" --log_level=test_suite --report_level=short \
  --run_test='!the_commit_method_fits_the_receiving_filesystem' >/tmp/suite.log 2>&1 &&
  ASIO_RDMA_FT_ROOT=$mnt/suite "$suite" --log_level=message \
    --run_test=the_commit_method_fits_the_receiving_filesystem >>/tmp/suite.log 2>&1; then
  say "ok: the file transfer suite passed on NFS"
  grep -E "receive directory on|No errors|test cases? out of" /tmp/suite.log || true
else
  cat /tmp/suite.log
  fail "the file transfer suite on NFS"
fi

# 2. rdma_cp storing into the mount, A sending across the wire.
inbox=$mnt/inbox
mkdir -p "$inbox"
"$rdma_cp" serve --dir "$inbox" --bind "$ASIO_RDMA_TEST_ADDR" --port $port >/tmp/serve.out \
  2>/tmp/serve.err &
server=$!
for _ in $(seq 300); do
  grep -q "^rdma_cp: port $port" /tmp/serve.out && break
  kill -0 $server 2>/dev/null || break
  sleep 0.1
done
cat /tmp/serve.out
grep -qF "rdma_cp: files are committed by link() and unlink()" /tmp/serve.out ||
  fail "the receiver on NFS did not choose link + unlink: $(cat /tmp/serve.out /tmp/serve.err)"
host_do barrier receiver-up
host_do barrier sent
want=/tmp/want
make_file "$want/one.bin" 300000
make_file "$want/t/a/b/deep.bin" 70000
make_file "$want/t/top.txt" 5
mkdir -p "$want/t/empty"
if diff -r "$want" "$inbox" && [[ -z $(find "$inbox" -name '*.part') ]]; then
  say "ok: a file and a tree stored on NFS, byte for byte, no temporary left"
else
  fail "stored on NFS: $(find "$inbox" | head -20)"
fi
# (Its exit status is 1 after the refused name: a server reports a failed
# connection in its status.)
kill -TERM $server
wait $server || true
# Unmounted while A still serves: a hard mount whose server is gone hangs.
umount "$mnt" || fail "umount $mnt"
host_do barrier done
finished=1
exit $fails
