#!/usr/bin/env bash
# Install everything a fresh Debian 12 machine needs to build and test
# asio-rdma, including the SoftRoCE test VM used by test/vm/run.sh.
#
# Idempotent and non-interactive: a second run only checks what is there
# (dpkg-query, the kernel cache) and returns in about a second.
#
# The guest kernel for the VM is NOT installed on the host: its package is
# downloaded and unpacked (dpkg -x) into the VM cache folder, so no kernel
# postinst hooks run here (they misbehave in containers) and the host's
# /boot and /lib/modules are left alone.
#
# Environment:
#   ASIO_RDMA_VM_CACHE  where the guest kernel is unpacked
#                       (default: $HOME/.cache/asio-rdma-vm)
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
# Tools live in sbin on Debian; a non-root PATH may lack it.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

CACHE="${ASIO_RDMA_VM_CACHE:-${HOME:-/root}/.cache/asio-rdma-vm}"

# Build + test toolchain, the RDMA userspace, and what the VM needs.
PACKAGES=(
  g++ cmake make pkg-config
  # the linker of CI's builds (ASIO_RDMA_FAST_BUILD): links in a fraction of ld's time
  mold
  dpkg-dev file libcli11-dev nlohmann-json3-dev libisal-dev doxygen
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libboost1.81-dev libboost-test1.81-dev
  qemu-system-x86 busybox-static kmod iproute2
  perftest rdmacm-utils ibverbs-utils iputils-ping tcpdump libfabric-bin python3-matplotlib
  # UCX's ucx_perftest: a reference in bench/compare_perftest (tag_lat)
  ucx-utils
  # an NFS server and client in the two-host VM (test/file_transfer/nfs_two_hosts.sh)
  nfs-kernel-server
  # the reference of rdma_cp's small-file benchmark (bench/compare_rdma_cp_small)
  rsync
  # unpacking the kernel source that SoftiWARP (siw.ko) is built from
  xz-utils
  # rdma_fabric (bench/rdma_fabric): MPI bootstrap, and Slurm for its srun test
  openmpi-bin libopenmpi-dev slurm-wlm
  # a stalled rank's threads, printed by test/fabric/watch_ranks.sh in the two-host test
  gdb
  # the sanitizer and fuzzing stage (scripts/test_sanitized.sh); llvm-16 for llvm-symbolizer
  clang-16 libclang-rt-16-dev libfuzzer-16-dev llvm-16
  libssl-dev
  # Protocol Buffers messages as typed RPC calls (include/asio_rdma/rpc/protobuf_codec.hpp)
  libprotobuf-dev protobuf-compiler
)

log() { printf 'setup.sh: %s\n' "$*" >&2; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

# Root for apt; fall back to sudo for a developer's own account.
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || die "must run as root (or have sudo)"
  SUDO=(sudo -E)
fi

# Wait for another apt/dpkg (e.g. a background install) instead of failing
# on the dpkg lock.
APT_OPTS=(-y -q -o DPkg::Lock::Timeout=900)

apt_updated=0
apt_update() {
  if [[ $apt_updated -eq 0 ]]; then
    log "apt-get update"
    "${SUDO[@]}" apt-get -q -o DPkg::Lock::Timeout=900 update >&2
    apt_updated=1
  fi
}

# --- 1. packages ---------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
  # "install ok installed" is the only state that means usable.
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $st == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing: ${missing[*]}"
  # Always refresh the lists before installing: a fresh machine has none,
  # and old ones point at files the mirror no longer has.
  apt_update
  # No recommends: they drag in GUI/multimedia stacks (qemu-system-gui,
  # gstreamer, ...) that a headless build/test machine never uses.
  "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" --no-install-recommends \
    "${missing[@]}" >&2
else
  log "packages: all ${#PACKAGES[@]} present"
fi

# --- 2. guest kernel (unpacked into the cache, not installed) -------------
# Resolve the real package behind the linux-image-amd64 metapackage,
# e.g. linux-image-6.1.0-56-amd64. apt-cache is local: no network.
resolve_kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

kpkg=$(resolve_kernel_pkg)
if [[ -z $kpkg ]]; then
  # No package lists yet (fresh machine): fetch them once and retry.
  apt_update
  kpkg=$(resolve_kernel_pkg)
fi
[[ -n $kpkg ]] || die "cannot resolve the kernel package behind linux-image-amd64"

kver=$(apt-cache policy "$kpkg" | awk '$1 == "Candidate:" { print $2; exit }')
[[ -n $kver && $kver != "(none)" ]] || die "no candidate version for $kpkg"

kdir_name="${kpkg}_${kver}"
kdir="$CACHE/kernel/$kdir_name"

# A cache entry is complete only once the marker is written (after the
# atomic rename), so an interrupted run is redone rather than trusted.
if [[ -f $kdir/.complete ]]; then
  log "guest kernel: $kdir_name cached in $kdir"
else
  log "guest kernel: downloading $kpkg ($kver) into $CACHE"
  mkdir -p "$CACHE/kernel"
  # Unpack next to the final place (same file system: atomic rename);
  # download under /tmp, which the unprivileged _apt user that
  # apt-get download switches to can reach (it cannot enter /root).
  tmp=$(mktemp -d "$CACHE/kernel/.tmp.XXXXXX")
  debdir=$(mktemp -d)
  trap 'rm -rf "$tmp" "$debdir"' EXIT
  mkdir "$tmp/root"
  if getent passwd _apt >/dev/null && [[ $(id -u) -eq 0 ]]; then
    chown _apt "$debdir"
  fi
  (cd "$debdir" && apt-get download -q "$kpkg=$kver" >&2) ||
    { apt_update; (cd "$debdir" && apt-get download -q "$kpkg=$kver" >&2); }
  deb=$(ls "$debdir"/*.deb)
  dpkg -x "$deb" "$tmp/root"
  # The kernel ABI name (e.g. 6.1.0-56-amd64) is the modules directory.
  # (bookworm ships lib/modules; look in usr/lib too for merged-/usr.)
  abi=
  for d in "$tmp/root"/lib/modules/* "$tmp/root"/usr/lib/modules/*; do
    [[ -d $d ]] && { abi=${d##*/}; break; }
  done
  [[ -n $abi ]] || die "no lib/modules in $deb"
  [[ -f $tmp/root/boot/vmlinuz-$abi ]] || die "no boot/vmlinuz-$abi in $deb"
  # modules.dep is made by depmod in the package's postinst, which dpkg -x
  # does not run: make it here so modprobe -d can resolve dependencies.
  depmod -b "$tmp/root" "$abi"
  printf '%s\n' "$abi" >"$tmp/root/.abi"
  printf '%s\n' "$kver" >"$tmp/root/.version"
  rm -rf "$kdir"
  mv -T "$tmp/root" "$kdir"
  touch "$kdir/.complete"
  rm -rf "$tmp" "$debdir"
  trap - EXIT
  log "guest kernel: $abi unpacked into $kdir"
fi

# --- 3. SoftiWARP (siw.ko) for the guest kernel -----------------------------
# Debian's kernel is built without CONFIG_RDMA_SIW; the module builds from
# Debian's own source of the same kernel against its headers (test/vm/run.sh
# --device siw). Cached in the kernel's folder, beside its other modules.
siw_ko="$kdir/lib/modules/$(<"$kdir/.abi")/extra/siw.ko"
if [[ -f $siw_ko ]]; then
  log "SoftiWARP: siw.ko cached"
else
  abi=$(<"$kdir/.abi")
  series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$abi")  # 6.1.0-56-amd64 -> 6.1
  st=$(dpkg-query -W -f='${Status}' "linux-headers-$abi" 2>/dev/null || true)
  if [[ $st != "install ok installed" ]]; then
    log "SoftiWARP: installing linux-headers-$abi"
    "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" --no-install-recommends "linux-headers-$abi" >&2 ||
      { apt_update; "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" --no-install-recommends \
          "linux-headers-$abi" >&2; }
  fi
  log "SoftiWARP: building siw.ko for $abi from linux-source-$series ($kver)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  if getent passwd _apt >/dev/null && [[ $(id -u) -eq 0 ]]; then
    chown _apt "$work"
  fi
  # Only the source package's siw folder is needed: no install of the 140 MB
  # package, only its download.
  (cd "$work" && apt-get download -q "linux-source-$series=$kver" >&2) ||
    { apt_update; (cd "$work" && apt-get download -q "linux-source-$series=$kver" >&2); }
  dpkg-deb --fsys-tarfile "$work"/linux-source-*.deb |
    tar -x -C "$work" "./usr/src/linux-source-$series.tar.xz"
  tar -xJf "$work/usr/src/linux-source-$series.tar.xz" -C "$work" --wildcards \
    "linux-source-$series/drivers/infiniband/sw/siw/*"
  src="$work/linux-source-$series/drivers/infiniband/sw/siw"
  make -s -C "/lib/modules/$abi/build" M="$src" CONFIG_RDMA_SIW=m modules >&2
  strip --strip-debug "$src/siw.ko"
  mkdir -p "$(dirname "$siw_ko")"
  cp "$src/siw.ko" "$siw_ko.tmp"
  mv -f "$siw_ko.tmp" "$siw_ko"
  depmod -b "$kdir" "$abi"
  rm -rf "$work"
  trap - EXIT
  log "SoftiWARP: $siw_ko"
fi

# "current" names the kernel test/vm/run.sh boots; switch it atomically so
# a VM starting meanwhile never sees a half-written link.
if [[ $(readlink "$CACHE/kernel/current" 2>/dev/null || true) != "$kdir_name" ]]; then
  ln -sfn "$kdir_name" "$CACHE/kernel/.current.new"
  mv -T "$CACHE/kernel/.current.new" "$CACHE/kernel/current"
fi

log "done"
