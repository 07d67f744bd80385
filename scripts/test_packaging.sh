#!/usr/bin/env bash
# Packaging tests (called by scripts/test.sh; needs root for dpkg -i):
#   0. the API reference (docs/Doxyfile) builds without a warning;
#   1. `cmake --install` of the already-built static tree (${BUILD_DIR:-build})
#      into a temporary prefix; test/consumer built against it with CMake
#      (find_package) and with pkg-config --static, and run;
#   2. a shared build (${PKG_BUILD_DIR:-build-pkg}: BUILD_SHARED_LIBS=ON, no
#      tests, so no Boost.Test): SONAME, only the API exported, consumers
#      against its `cmake --install` prefix;
#   3. its .deb packages (cpack): Depends, `dpkg -i`, consumers against the
#      installed files, the installed programs run; then the packages are
#      removed again.
# Prints "N% tests passed, F tests failed out of T" like ctest, for test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build_dir=${BUILD_DIR:-build}
pkg_dir=${PKG_BUILD_DIR:-build-pkg}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
check() { # name, command...
  local name=$1
  shift
  if "$@" >"$tmp/out" 2>&1; then
    echo "    passed: $name"
    passed=$((passed + 1))
  else
    echo "    FAILED: $name"
    sed 's/^/      /' "$tmp/out" | tail -n 40
    failed=$((failed + 1))
  fi
}

# consumers NAME PREFIX: the CMake and the pkg-config consumer against PREFIX
# ("" = the system, i.e. the installed .deb), each built and run.
consumers() {
  local name=$1 prefix=$2 static=${3:-}
  local out=$tmp/consumer-$name
  local cmake_args=() pc_path=${PKG_CONFIG_PATH:-} ld_path=
  if [[ -n $prefix ]]; then
    cmake_args=(-DCMAKE_PREFIX_PATH="$prefix")
    pc_path=$(dirname "$(find "$prefix" -name asio-rdma.pc | head -n 1)")
    ld_path=$(dirname "$(find "$prefix" -name 'libasio_rdma.*' | head -n 1)")
  fi
  # The two consumers compile at once, one per core (each is one compiler process).
  mkdir -p "$out"
  env PKG_CONFIG_PATH="$pc_path" test/consumer/build_pkg_config.sh "$out/pc" $static \
    >"$out/pc.log" 2>&1 &
  local pc_build=$!
  check "$name: CMake consumer (find_package) builds" \
    cmake -S test/consumer -B "$out/cmake" "${cmake_args[@]}"
  check "$name: CMake consumer builds" cmake --build "$out/cmake"
  check "$name: CMake consumer runs" env LD_LIBRARY_PATH="$ld_path" "$out/cmake/consumer"
  check "$name: pkg-config consumer builds" finished "$pc_build" "$out/pc.log"
  check "$name: pkg-config consumer runs" env LD_LIBRARY_PATH="$ld_path" "$out/pc"
}

# finished PID LOG: waits for the background command PID, prints its LOG, and has its
# exit status.
finished() {
  local status=0
  wait "$1" || status=$?
  cat "$2"
  return $status
}

# Doxygen (one process) runs beside the static library's install and consumers.
env ASIO_RDMA_DOC_DIR="$build_dir/doc" doxygen docs/Doxyfile >"$tmp/doxygen.log" 2>&1 &
doxygen=$!

echo "--- static library: cmake --install $build_dir"
check "static: cmake --install" cmake --install "$build_dir" --prefix "$tmp/static"
consumers static "$tmp/static" --static

echo "--- API reference (Doxygen, warnings are errors)"
check "docs: doxygen docs/Doxyfile without a warning" finished "$doxygen" "$tmp/doxygen.log"

echo "--- shared library: $pkg_dir"
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: install and cpack install what the build step
# below built (the library and the packaged programs) without building `all` first
# (examples, benchmarks), which would double this stage's time. No debug information
# (-O2 as RelWithDebInfo, without its -g): packages ship stripped, and generating it
# costs this stage compile time.
check "shared: configure (no tests, so no Boost.Test)" \
  cmake -S . -B "$pkg_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" -DBUILD_SHARED_LIBS=ON \
  -DASIO_RDMA_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
  -DASIO_RDMA_FAST_BUILD=ON
check "shared: Boost.Test was not looked for (tests off)" \
  sh -c "! grep -q '^boost_unit_test_framework_DIR' '$pkg_dir/CMakeCache.txt'"
check "shared: build" cmake --build "$pkg_dir" -j "${BUILD_JOBS:-2}" \
  --target asio_rdma rdma_echo rdma_bench rdma_cp raw_ping
lib=$(find "$pkg_dir/lib" -maxdepth 1 -name 'libasio_rdma.so.*.*.*' | head -n 1)
check "shared: SONAME is libasio_rdma.so.0.2" \
  sh -c "readelf -d '$lib' | grep -F 'Library soname: [libasio_rdma.so.0.2]'"
# The API is exported; the library's private classes (lib/*.hpp) are not.
check "shared: the API is exported" \
  sh -c "nm -DC --defined-only '$lib' | grep -F 'asio_rdma::memory_region::memory_region'"
check "shared: private classes are hidden" \
  sh -c "! nm -DC --defined-only '$lib' |
         grep -E ' [A-Za-z] asio_rdma::detail::(receive_ring|cm_channel|completion_queue|fd_waiter)::'"
check "shared: cmake --install" cmake --install "$pkg_dir" --prefix "$tmp/shared"
consumers shared "$tmp/shared"

echo "--- .deb packages"
rm -f "$pkg_dir"/asio-rdma*.deb
check "deb: cpack -G DEB" sh -c "cd '$pkg_dir' && cpack -G DEB"
debs=("$pkg_dir"/asio-rdma_*.deb "$pkg_dir"/asio-rdma-dev_*.deb)
check "deb: asio-rdma depends on libibverbs1 and librdmacm1" \
  sh -c "dpkg-deb -f '${debs[0]}' Depends | grep -E 'libibverbs1' | grep -E 'librdmacm1'"
check "deb: asio-rdma holds the library and the programs" \
  sh -c "dpkg-deb -c '${debs[0]}' | grep -E 'libasio_rdma\.so\.0\.2\.0\$' &&
         for p in rdma_echo rdma_bench rdma_cp raw_ping; do dpkg-deb -c '${debs[0]}' | grep -E \"usr/bin/\$p\$\" || exit 1; done"
check "deb: asio-rdma-dev depends on asio-rdma, Boost >= 1.81, the verbs headers" \
  sh -c "dpkg-deb -f '${debs[1]}' Depends | grep -F 'asio-rdma (= ' | grep -F 'libboost1.81-dev' | grep -F 'libibverbs-dev' | grep -F 'librdmacm-dev'"
if [[ $(id -u) -ne 0 ]]; then
  echo "    FAILED: deb: dpkg -i needs root"
  failed=$((failed + 1))
else
  # One installation at a time on a shared machine; removed again afterwards.
  exec 9>/tmp/asio-rdma-dpkg.lock
  flock 9
  check "deb: dpkg -i" dpkg -i "${debs[@]}"
  consumers deb ""
  for program in rdma_echo rdma_bench rdma_cp raw_ping; do
    check "deb: installed $program --help" /usr/bin/$program --help
  done
  check "deb: dpkg -r" dpkg -r asio-rdma-dev asio-rdma
  flock -u 9
fi

total=$((passed + failed))
echo "$(( total > 0 ? passed * 100 / total : 0 ))% tests passed, $failed tests failed out of $total"
[[ $failed -eq 0 ]]
