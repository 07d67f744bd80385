#!/usr/bin/env bash
# Run one command against a real RDMA device: the machine's own if it has
# one, else SoftRoCE (rdma_rxe) inside a throw-away qemu TCG guest.
# See test/vm/README.md and docs/softroce_vm.md for the why.
#
# The guest shares the host's / read-only (virtio-9p), so the host's build
# tree, libraries and tools run unchanged inside it; the current directory
# and any --rw folder are shared read-write at the same path. The command's
# stdout/stderr are streamed over two virtio serial ports (so no kernel
# console noise gets mixed in) and its exit status is handed back through a
# per-run control share.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: test/vm/run.sh [options] [--] COMMAND [ARGS...]

Runs COMMAND in the current directory with ASIO_RDMA_DEVICE and
ASIO_RDMA_TEST_ADDR set to a working RDMA device and its IPv4 address.
Uses the machine's own RDMA device when there is one, otherwise boots a
qemu guest with SoftRoCE (rxe0 on veth0, 192.0.2.1). Exits with COMMAND's
status; 124 on --timeout; 125 when the VM itself failed.

options:
  --vm             always use the VM, even if a local RDMA device exists
  --device rxe|siw the guest's soft RDMA device: rxe0 (SoftRoCE, RoCE v2;
                   the default) or siw0 (SoftiWARP, iWARP; its module is
                   built by scripts/setup.sh for the guest kernel)
  --timeout SECS   kill everything after SECS seconds (default 3600)
  --smp N          guest vCPUs (default 2)
  --mem MB         guest memory in MiB (default 3072)
  --rw DIR         also share DIR read-write (same path in the guest);
                   repeatable. The current directory always is.
  --env NAME[=VAL] pass host variable NAME (or set it to VAL) in the guest;
                   repeatable. CTEST_OUTPUT_ON_FAILURE always passes.
  --print-mode     print "vm KERNEL" or "local DEVICE ADDR" and exit

one guest of a pair (test/vm/two_hosts drives these; see test/vm/README.md):
  --wire listen=127.0.0.1:PORT | connect=127.0.0.1:PORT
                   a virtio NIC on a qemu socket netdev (id n0): SoftRoCE
                   runs on eth0 instead of a veth pair
  --addr IP        the guest's address on eth0 (default 192.0.2.1)
  --peer-addr IP   exported as ASIO_RDMA_PEER_ADDR
  --mac MAC        the NIC's MAC address
  --monitor PATH   the qemu monitor on a unix socket
  --control PATH   a virtio serial port named "ctl" on a unix socket, so a
                   command in the guest can ask the host to act mid-run
  --qemu-pid PATH  write qemu's pid here (to kill the guest as a host dies)
  -v, --verbose    stream the guest console to stderr, print timings
  -h, --help       this text

environment:
  ASIO_RDMA_VM_CACHE  kernel + initramfs cache
                      (default $HOME/.cache/asio-rdma-vm; filled by
                      scripts/setup.sh)
  ASIO_RDMA_VM_KERNEL_ARGS  extra guest kernel arguments (debugging,
                      e.g. "loglevel=7" with -v to see the whole boot)
EOF
}

# Debian keeps ip/rdma/modprobe in sbin; a user's PATH may lack it.
for d in /usr/local/sbin /usr/sbin /sbin; do
  [[ :$PATH: == *:$d:* ]] || PATH+=:$d
done
export PATH

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { printf 'run.sh: error: %s\n' "$*" >&2; exit 125; }

# --- options ---------------------------------------------------------------
force_vm=0
timeout_s=3600
smp=2
mem=3072
verbose=0
print_mode=0
device=rxe
wire='' addr=192.0.2.1 peer_addr='' mac='' monitor='' control='' qemu_pidfile=''
rw_dirs=()
env_names=()

need_arg() { [[ $# -ge 2 ]] || die "option $1 needs an argument"; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --vm) force_vm=1; shift ;;
    --device) need_arg "$@"
      [[ $2 == rxe || $2 == siw ]] || die "--device: rxe or siw, not $2"
      device=$2; shift 2 ;;
    --timeout) need_arg "$@"; is_uint "$2" || die "--timeout: not a number: $2"
      timeout_s=$2; shift 2 ;;
    --smp) need_arg "$@"; is_uint "$2" || die "--smp: not a number: $2"
      smp=$2; shift 2 ;;
    --mem) need_arg "$@"; is_uint "$2" || die "--mem: not a number: $2"
      mem=$2; shift 2 ;;
    --rw) need_arg "$@"; rw_dirs+=("$2"); shift 2 ;;
    --env) need_arg "$@"; env_names+=("$2"); shift 2 ;;
    --print-mode) print_mode=1; shift ;;
    --wire) need_arg "$@"
      [[ $2 =~ ^(listen|connect)=127\.0\.0\.1:[0-9]+$ ]] ||
        die "--wire: listen=127.0.0.1:PORT or connect=127.0.0.1:PORT, not $2"
      wire=$2; shift 2 ;;
    --addr) need_arg "$@"; addr=$2; shift 2 ;;
    --peer-addr) need_arg "$@"; peer_addr=$2; shift 2 ;;
    --mac) need_arg "$@"; mac=$2; shift 2 ;;
    --monitor) need_arg "$@"; monitor=$2; shift 2 ;;
    --control) need_arg "$@"; control=$2; shift 2 ;;
    --qemu-pid) need_arg "$@"; qemu_pidfile=$2; shift 2 ;;
    -v|--verbose) verbose=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) usage >&2; die "unknown option: $1" ;;
    *) break ;;
  esac
done

if [[ $print_mode -eq 0 && $# -eq 0 ]]; then
  usage >&2
  die "no command given"
fi

# --- a real device? ----------------------------------------------------------
# A local device counts only if verbs can open it: ibv_devices lists it and
# the uverbs character devices exist.
local_dev=
if [[ $force_vm -eq 0 && -d /dev/infiniband ]] && command -v ibv_devices >/dev/null; then
  # Output: a header line, a dashes line, then "    name    guid".
  local_dev=$(ibv_devices 2>/dev/null | awk 'NR > 2 && NF { print $1; exit }' || true)
fi

if [[ -n $local_dev ]]; then
  # Respect values the caller set on purpose (e.g. a second port).
  dev=${ASIO_RDMA_DEVICE:-$local_dev}
  addr=${ASIO_RDMA_TEST_ADDR:-}
  netdev=
  if [[ -z $addr ]]; then
    # "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0"
    netdev=$(rdma link show 2>/dev/null | awk -v d="$dev" '
      $1 == "link" && index($2, d "/") == 1 {
        for (i = 3; i < NF; i++) if ($i == "netdev") { print $(i + 1); exit } }' || true)
    if [[ -n $netdev ]]; then
      addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null |
        awk '{ sub(/\/.*/, "", $4); print $4; exit }' || true)
    fi
  fi
  if [[ $print_mode -eq 1 ]]; then
    echo "local $dev ${addr:-none}"
    exit 0
  fi
  log "local device $dev${netdev:+ (netdev $netdev)}, address ${addr:-none}"
  [[ -n $addr ]] || log "warning: no IPv4 address for $dev; ASIO_RDMA_TEST_ADDR unset"
  export ASIO_RDMA_DEVICE=$dev
  [[ -n $addr ]] && export ASIO_RDMA_TEST_ADDR=$addr
  # RDMA pins memory; a normal user may not be allowed to raise the limit.
  ulimit -l unlimited 2>/dev/null ||
    log "warning: cannot raise the memlock limit (now $(ulimit -l) KiB)"
  for spec in "${env_names[@]}"; do
    # shellcheck disable=SC2163  # exports NAME=VALUE, as intended
    if [[ $spec == *=* ]]; then export "$spec"; fi
  done
  rc=0
  timeout -k 10 "$timeout_s" "$@" || rc=$?
  [[ $rc -eq 124 ]] && log "timeout: command still running after ${timeout_s}s, killed"
  exit "$rc"
fi

# --- the VM: kernel and initramfs from the cache --------------------------------
CACHE="${ASIO_RDMA_VM_CACHE:-${HOME:-/root}/.cache/asio-rdma-vm}"
[[ -f $CACHE/kernel/current/.complete ]] ||
  die "no guest kernel in $CACHE/kernel (run scripts/setup.sh first)"
# Pin the resolved folder: setup.sh may switch "current" meanwhile.
kdir=$(readlink -f "$CACHE/kernel/current")
kabi=$(<"$kdir/.abi")
kpkgver=$(<"$kdir/.version")
vmlinuz=$kdir/boot/vmlinuz-$kabi

if [[ $print_mode -eq 1 ]]; then
  echo "vm $kabi"
  exit 0
fi

for tool in qemu-system-x86_64 modprobe depmod timeout mkfifo; do
  command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done
busybox=/bin/busybox
# The initramfs has no libc: a dynamically linked busybox would not start.
if [[ ! -x $busybox ]] || ldd "$busybox" >/dev/null 2>&1; then
  die "$busybox is missing or not static (install busybox-static)"
fi

# Modules the guest needs, top-level only: modprobe --show-depends adds
# their dependencies in load order. crc32_generic comes first: rxe needs
# its crc32 transform or "rdma link add" fails with ENOENT.
GUEST_MODULES=(crc32_generic virtio_pci virtio_console 9pnet_virtio 9p veth
  virtio_net rdma_rxe ib_uverbs rdma_ucm)
# SoftiWARP: Debian's kernel lacks it; scripts/setup.sh builds siw.ko from
# Debian's linux-source into the cached kernel's extra/ (depmod knows it).
# Its crc32c comes from crc32c_generic through libcrc32c.
if [[ $device == siw ]]; then
  [[ -f $kdir/lib/modules/$kabi/extra/siw.ko ]] ||
    die "no siw.ko for $kabi in $kdir (run scripts/setup.sh first)"
  GUEST_MODULES+=(crc32c_generic siw)
fi

# PID 1 of the guest. Deliberately minimal and generic (it is cached in
# the initramfs): load the modules, mount the per-run control share and
# hand over to its guest.sh, which run.sh writes anew on every run.
# shellcheck disable=SC2016  # expands in the guest, not here
INIT_SCRIPT='#!/bin/sh
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for m in /lib/modules/*.ko; do
  insmod "$m" || echo "init: insmod $m failed"
done
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 asio_rdma_ctl /ctl; then
  sh /ctl/guest.sh
else
  echo "init: cannot mount the control share"
fi
sync
# -no-reboot turns either into a qemu exit.
poweroff -f
reboot -f
'

# Rebuild whenever anything that goes into it changes.
initrd_key=$( {
  printf '%s\n' "$INIT_SCRIPT" "${GUEST_MODULES[*]}" "$kdir" "$kabi" "$kpkgver"
  sha256sum "$busybox"
} | sha256sum | cut -c1-16)
initrd=$CACHE/initramfs/initramfs-$kabi-$initrd_key.cpio

# A subshell, for a cleanup trap of its own.
build_initrd() (
  local stage mods m n=0 f
  mkdir -p "$CACHE/initramfs"
  stage=$(mktemp -d "$CACHE/initramfs/.stage.XXXXXX")
  trap 'rm -rf "$stage" "$stage.cpio"' EXIT
  # dpkg -x does not run depmod; setup.sh does, but be robust to a cache
  # made by hand.
  [[ -f $kdir/lib/modules/$kabi/modules.dep ]] || depmod -b "$kdir" "$kabi"
  mods=$(for m in "${GUEST_MODULES[@]}"; do
           modprobe -d "$kdir" -S "$kabi" --show-depends "$m" ||
             die "module $m not found in $kdir"
         done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
  mkdir -p "$stage"/{bin,dev,proc,sys,ctl,newroot,lib/modules}
  cp "$busybox" "$stage/bin/busybox"
  for f in $("$busybox" --list); do
    [[ $f == busybox ]] || ln -s busybox "$stage/bin/$f"
  done
  # Numbered names keep the dependency order for init's glob.
  for m in $mods; do
    cp "$m" "$stage/lib/modules/$(printf '%02d' "$n")-$(basename "$m")"
    n=$((n + 1))
  done
  printf '%s' "$INIT_SCRIPT" >"$stage/init"
  chmod 755 "$stage/init"
  # Uncompressed: decompressing under TCG costs more than reading it.
  (cd "$stage" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) \
    >"$stage.cpio"
  mv -f "$stage.cpio" "$initrd"   # atomic: parallel runs never see half a file
  log "built $initrd ($n modules)"
)
[[ -f $initrd ]] || build_initrd

# --- writable shares ------------------------------------------------------------
# The cwd always, then --rw folders; physical paths, deduplicated, parents
# before children (sorted) so nested mounts stack correctly.
cwd_logical=$PWD
declare -A seen_rw=()
rw_list=()
for d in "$PWD" "${rw_dirs[@]}"; do
  [[ -d $d ]] || die "--rw: not a folder: $d"
  p=$(cd "$d" && pwd -P)
  [[ $p != / ]] || die "refusing to share / read-write (run from a project folder)"
  [[ -z ${seen_rw[$p]:-} ]] || continue
  seen_rw[$p]=1
  rw_list+=("$p")
done
mapfile -t rw_list < <(printf '%s\n' "${rw_list[@]}" | LC_ALL=C sort)

# --- per-run folder: control share, fifos, logs --------------------------------
# A run killed with SIGKILL leaves its folder behind: remove those whose
# owner is gone (the pid file is written right after mktemp, so a folder
# without one may belong to a run that is just starting: keep it).
for old in "${TMPDIR:-/tmp}"/asio-rdma-vm.*/; do
  [[ -f $old/pid ]] || continue
  kill -0 "$(<"$old/pid")" 2>/dev/null || rm -rf "$old" 2>/dev/null || true
done
run=$(mktemp -d "${TMPDIR:-/tmp}/asio-rdma-vm.XXXXXX")
echo $$ >"$run/pid.tmp" && mv "$run/pid.tmp" "$run/pid"   # never seen empty
ctl=$run/ctl
mkdir "$ctl"
mkfifo "$run/out" "$run/err"

qpid='' outpid='' errpid='' tailpid=''
# Wait for a fifo reader (cat) to finish once qemu, the writer, is gone.
# If it has the fifo open it is draining and will see EOF: wait, however
# long the consumer downstream takes. If it is still stuck in open()
# because qemu never opened the fifo (qemu failed early), unblock it: an
# O_RDWR open never blocks and counts as a writer, so the reader's open
# returns, and once we close it sees EOF.
has_open() {
  local f
  for f in /proc/"$1"/fd/*; do
    [[ $(readlink "$f" 2>/dev/null) == "$2" ]] && return 0
  done
  return 1
}
release_fifo() {
  local fifo=$1 pid=$2
  while kill -0 "$pid" 2>/dev/null; do
    if has_open "$pid" "$fifo"; then
      wait "$pid" 2>/dev/null || true
      return 0
    fi
    { exec 9<>"$fifo"; exec 9>&-; } 2>/dev/null || true
    sleep 0.05
  done
}
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  if [[ -n $qpid ]]; then
    # timeout(1) forwards TERM to qemu and waits for it.
    kill "$qpid" 2>/dev/null || true
    wait "$qpid" 2>/dev/null || true
  fi
  if [[ -n $outpid ]]; then release_fifo "$run/out" "$outpid"; fi
  if [[ -n $errpid ]]; then release_fifo "$run/err" "$errpid"; fi
  if [[ -n $tailpid ]]; then kill "$tailpid" 2>/dev/null || true; fi
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Single-quote for the guest's busybox sh.
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# config: what guest.sh needs to know, as sh assignments.
{
  echo "VERBOSE=$verbose"
  echo "NET_MODE=$([[ -n $wire ]] && echo eth || echo veth)"
  echo "ADDR=$(sq "$addr")"
  echo "DEVICE=$device"
  echo "RW_COUNT=${#rw_list[@]}"
  for i in "${!rw_list[@]}"; do
    echo "RW_PATH_$i=$(sq "${rw_list[$i]}")"
  done
} >"$ctl/config"

# cmd.sh: runs under the host's bash inside the chroot, so %q quoting is
# safe. The environment is built from scratch (env -i in guest.sh).
guest_path=$PATH
{
  echo '# generated by test/vm/run.sh'
  # RDMA registers (pins) memory; the default 8 MiB is far too little.
  echo 'ulimit -l unlimited || echo "run.sh(guest): cannot raise memlock" >&2'
  printf 'export PATH=%q HOME=/tmp\n' "$guest_path"
  printf 'export ASIO_RDMA_TEST_ADDR=%q ASIO_RDMA_DEVICE=%q\n' "$addr" "${device}0"
  # The guest kernel's package: modules beyond the boot set load on demand
  # with modprobe -d "$ASIO_RDMA_VM_KERNEL_DIR" NAME (nfsd, nfsv4).
  printf 'export ASIO_RDMA_VM_KERNEL_DIR=%q\n' "$kdir"
  [[ -z $peer_addr ]] || printf 'export ASIO_RDMA_PEER_ADDR=%q\n' "$peer_addr"
  if [[ -n ${CTEST_OUTPUT_ON_FAILURE+x} ]]; then
    printf 'export CTEST_OUTPUT_ON_FAILURE=%q\n' "$CTEST_OUTPUT_ON_FAILURE"
  fi
  for spec in "${env_names[@]}"; do
    if [[ $spec == *=* ]]; then
      name=${spec%%=*}; val=${spec#*=}
    else
      name=$spec
      [[ -n ${!name+x} ]] || continue   # unset on the host: leave unset
      val=${!name}
    fi
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "--env: bad name: $name"
    printf 'export %s=%q\n' "$name" "$val"
  done
  printf 'cd -- %q || exit 126\n' "$cwd_logical"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$ctl/cmd.sh"

# guest.sh: per-run second stage, run by the initramfs's busybox sh.
cat >"$ctl/guest.sh" <<'GUEST'
# Second stage in the guest (busybox sh, initramfs root). stdout/stderr of
# this script are the serial console until the output ports are found.
. /ctl/config
R=/newroot
MNT9P=trans=virtio,version=9p2000.L,msize=512000

fail() {
  # Reported by the host as "VM failed: ..."; also on the console.
  echo "$*" >/ctl/error
  echo "guest: $*"
  exit 1
}

# Virtio serial ports show up asynchronously (host control messages);
# wait for both names before redirecting.
out= err= i=0
while [ $i -lt 100 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ -r "$p/name" ] || continue
    case $(cat "$p/name") in
      out) out=/dev/${p##*/} ;;
      err) err=/dev/${p##*/} ;;
    esac
  done
  [ -c "$out" ] && [ -c "$err" ] && break
  sleep 0.1
  i=$((i + 1))
done
[ -c "$out" ] && [ -c "$err" ] || fail "virtio serial ports out/err not found"

# cache=loose: the guest may keep what it read (pages, directory entries).
# Without it every exec re-reads the binary and its libraries over 9p:
# about 1 s per "ip" command instead of 0.06 s. Nobody else writes these
# folders while this short-lived guest runs, so the cache cannot go stale
# in a way that matters.
mount -t 9p -o "$MNT9P,ro,cache=loose" hostroot $R || fail "cannot mount the host root"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
# What udev makes on a normal system: bash's process substitution needs /dev/fd.
ln -sf /proc/self/fd $R/dev/fd
ln -sf /proc/self/fd/0 $R/dev/stdin
ln -sf /proc/self/fd/1 $R/dev/stdout
ln -sf /proc/self/fd/2 $R/dev/stderr
mount -t devpts devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
# /run: ip netns and others need it writable; /tmp: HOME, scratch files.
mount -t tmpfs -o mode=755 tmpfs $R/run
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
i=0
while [ $i -lt "$RW_COUNT" ]; do
  eval "p=\$RW_PATH_$i"
  # Exists on the read-only root, or lies under a tmpfs just mounted.
  mkdir -p "$R$p" 2>/dev/null
  # cache=loose here too: ctest execs test binaries from the build tree
  # (0.28 s -> 0.06 s per exec of a small binary); writes are cached and
  # flushed by the sync below. Host-side changes during the run are not seen.
  mount -t 9p -o "$MNT9P,cache=loose" "rw$i" "$R$p" || fail "cannot mount $p read-write"
  i=$((i + 1))
done

# SoftRoCE, with the host's own iproute2 (busybox ip lacks veth/rdma).
# MTU 9000 before "rdma link add": rxe then uses active_mtu 4096.
# One guest: rxe cannot bind lo and ignores network namespaces: one veth
# pair, the initial namespace, both peers on one address. One of a pair:
# rxe on eth0, the NIC on the wire to the other guest.
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NET_MODE="$NET_MODE" ADDR="$ADDR" DEV="$DEVICE" \
  chroot $R /bin/sh -ec '
  ip link set lo up
  if [ "$NET_MODE" = eth ]; then
    ip link set eth0 mtu 9000
    ip addr add "$ADDR/24" dev eth0
    ip link set eth0 up
    rdma link add "${DEV}0" type "$DEV" netdev eth0
  else
    ip link add veth0 type veth peer name veth1
    ip link set veth0 mtu 9000
    ip link set veth1 mtu 9000
    ip addr add "$ADDR/24" dev veth0
    ip link set veth0 up
    ip link set veth1 up
    rdma link add "${DEV}0" type "$DEV" netdev veth0
  fi
  # The port turns ACTIVE once veth has carrier; wait for it (max 10 s).
  i=0
  until rdma link show "${DEV}0/1" | grep -q "state ACTIVE"; do
    i=$((i + 1)); [ $i -lt 100 ] || { rdma link show; exit 1; }
    sleep 0.1
  done
' >"$err" 2>&1 || fail "soft RDMA setup ($NET_MODE + ${DEVICE}0) failed"

[ "$VERBOSE" = 1 ] &&
  echo "run.sh(guest): ready, uptime $(cut -d' ' -f1 /proc/uptime)s" >"$err"

cp /ctl/cmd.sh $R/run/asio-rdma-vm-cmd.sh
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  chroot $R /bin/bash /run/asio-rdma-vm-cmd.sh </dev/null >"$out" 2>"$err"
rc=$?

[ "$VERBOSE" = 1 ] &&
  echo "run.sh(guest): done, uptime $(cut -d' ' -f1 /proc/uptime)s" >"$err"
# The read-write shares cache writes (cache=loose): push them to the host
# before reporting, so everything is on disk when run.sh returns.
sync
# Write-then-rename: the host never reads a half-written status.
echo $rc >/ctl/status.tmp && mv /ctl/status.tmp /ctl/status
GUEST

# --- boot ------------------------------------------------------------------------
# qemu's -opt parser splits on commas; a literal comma is written twice.
qesc() { printf '%s' "${1//,/,,}"; }

# shellcheck disable=SC2054  # the commas are qemu's, not array separators
qemu=(qemu-system-x86_64
  -nodefaults -nic none
  -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem"
  -nographic -no-reboot
  -kernel "$vmlinuz" -initrd "$initrd"
  # mitigations=off: page-table isolation etc. only slow a TCG guest.
  -append "console=ttyS0 quiet panic=-1 mitigations=off ${ASIO_RDMA_VM_KERNEL_ARGS:-}"
  -chardev "file,id=con,path=$(qesc "$run/console.log")" -serial chardev:con
  -device virtio-serial-pci,id=vser
  -chardev "file,id=cout,path=$(qesc "$run/out")"
  -device virtserialport,bus=vser.0,chardev=cout,name=out
  -chardev "file,id=cerr,path=$(qesc "$run/err")"
  -device virtserialport,bus=vser.0,chardev=cerr,name=err
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
  -virtfs "local,path=$(qesc "$ctl"),mount_tag=asio_rdma_ctl,security_model=none,multidevs=remap"
)
if [[ -n $wire ]]; then
  qemu+=(-netdev "socket,id=n0,$wire" -device "virtio-net-pci,id=nic0,netdev=n0${mac:+,mac=$mac}")
fi
[[ -z $monitor ]] || qemu+=(-monitor "unix:$(qesc "$monitor"),server=on,wait=off")
if [[ -n $control ]]; then
  qemu+=(-chardev "socket,id=cctl,path=$(qesc "$control"),server=on,wait=off"
    -device virtserialport,bus=vser.0,chardev=cctl,name=ctl)
fi
[[ -z $qemu_pidfile ]] || qemu+=(-pidfile "$qemu_pidfile")
for i in "${!rw_list[@]}"; do
  qemu+=(-virtfs "local,path=$(qesc "${rw_list[$i]}"),mount_tag=rw$i,security_model=none,multidevs=remap")
done

log "$([[ $device == siw ]] && echo SoftiWARP || echo SoftRoCE) VM (${device}0; qemu TCG, ${smp} vCPU, ${mem} MiB), kernel $kabi ($kpkgver)"

# SeaBIOS writes terminal escapes (clear screen, reset) to the serial
# console; keep them off the user's terminal.
strip_esc() { sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[A-Za-z]//g' -e 's/\r$//'; }

# Readers first: qemu's open() of a fifo blocks until one is there.
cat "$run/out" &
outpid=$!
cat "$run/err" >&2 &
errpid=$!
: >"$run/console.log"

t0=$(date +%s.%N)
# pdeathsig: if run.sh itself is SIGKILLed (e.g. by a test runner's
# timeout), timeout(1) gets TERM and takes qemu down with it instead of
# leaving a VM running for up to --timeout seconds.
pdeath=()
command -v setpriv >/dev/null && pdeath=(setpriv --pdeathsig TERM)
"${pdeath[@]}" timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null >"$run/qemu.log" 2>&1 &
qpid=$!
if [[ $verbose -eq 1 ]]; then
  # --pid: tail prints what is left and ends on its own once qemu is gone
  # (checked every -s seconds), even if we are killed.
  tail -n +1 -f -s 0.2 --pid="$qpid" "$run/console.log" > >(strip_esc >&2) &
  tailpid=$!
fi
qrc=0
wait "$qpid" || qrc=$?
qpid=
# What qemu itself reported (e.g. a socket netdev whose peer broke the
# stream): shown whatever the outcome, a guest's failure may start there.
if [[ -s $run/qemu.log ]]; then
  sed 's/^/qemu: /' "$run/qemu.log" | tail -n 20 >&2
fi
# Output still in flight in the fifos: let the readers drain it.
release_fifo "$run/out" "$outpid"; outpid=
release_fifo "$run/err" "$errpid"; errpid=
if [[ -n $tailpid ]]; then
  wait "$tailpid" 2>/dev/null || true
  tailpid=
fi
t1=$(date +%s.%N)
[[ $verbose -eq 1 ]] && log "VM total $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')s"

show_console() { # (what qemu said is already out: printed after every run)
  log "last console lines:"
  tail -n 25 "$run/console.log" | strip_esc | sed 's/^/  | /' >&2
}

if [[ -f $ctl/status ]]; then
  status=$(<"$ctl/status")
  is_uint "$status" || die "VM failed: unreadable exit status '$status'"
  exit "$status"
fi
if [[ $qrc -eq 124 || $qrc -eq 137 ]]; then
  # 137 is also what a SIGKILL from outside gives (test/vm/two_hosts' "kill A"):
  # only a run that lasted its whole --timeout timed out.
  if awk -v a="$t0" -v b="$t1" -v t="$timeout_s" 'BEGIN { exit !(b - a < t) }'; then
    log "VM killed from outside (qemu got SIGKILL after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')s)"
    exit 137
  fi
  log "timeout: VM still running after ${timeout_s}s, killed"
  exit 124
fi
if [[ -f $ctl/error ]]; then
  log "VM failed: $(<"$ctl/error")"
else
  log "VM failed: the guest stopped without an exit status (qemu exit code $qrc)"
fi
show_console
exit 125
