#!/usr/bin/env bash
# The sanitizer and fuzzing stage of scripts/test.sh (docs/sanitizers.md):
#   1. build-asan (clang-16, AddressSanitizer + UndefinedBehaviorSanitizer with
#      LeakSanitizer, libFuzzer coverage): the whole suite, unit and netns tests
#      on this machine, then every fuzz target for ASIO_RDMA_FUZZ_SECONDS;
#   2. build-tsan (g++, ThreadSanitizer): the library and the threading
#      tests (test/integration/threads_test.cpp);
#   3. the integration tests of both builds, in one boot of the SoftRoCE VM
#      (or on the local RDMA device).
# Any sanitizer report fails its test. Prints CTest's summary line for the
# whole stage ("N% tests passed, F tests failed out of T"), which test.sh adds
# to its own count. Needs root for the netns tests, like test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
asan_dir=${ASAN_BUILD_DIR:-build-asan}
tsan_dir=${TSAN_BUILD_DIR:-build-tsan}
jobs=${BUILD_JOBS:-2}
here=$(pwd)

# Reports go to stderr, with source lines, and make the process fail: a test
# with one fails.
symbolizer=external_symbolizer_path=/usr/lib/llvm-16/bin/llvm-symbolizer
export ASAN_OPTIONS="$symbolizer:detect_leaks=1:halt_on_error=1:abort_on_error=0:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="$symbolizer:halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$here/test/sanitizers/lsan.supp:print_suppressions=0"
# Volume-heavy tests move a fifth of their bytes and calls (test/common/rdma_test.hpp,
# scaled()): the errors looked for here show in that as in the rest.
export ASIO_RDMA_TEST_VOLUME=0.2
export TSAN_OPTIONS="$symbolizer:halt_on_error=1:second_deadlock_stack=1:suppressions=$here/test/sanitizers/tsan.supp"

configure() { # dir, compiler, sanitizers, extra cmake args...
  local dir=$1 compiler=$2 sanitize=$3
  shift 3
  # RelWithDebInfo without its -g: cmake/sanitizers.cmake adds line tables only. -O1,
  # as the sanitizers' own documentation suggests: their checks need no more, and it
  # compiles faster (this stage's builds are a quarter of CI's time).
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" \
    -DCMAKE_CXX_COMPILER="$compiler" \
    -DASIO_RDMA_WITH_RAW_SOCKET=ON -DASIO_RDMA_FAST_BUILD=ON -DASIO_RDMA_SANITIZE="$sanitize" "$@" >/dev/null
}

start=$SECONDS
# build-asan leaves out what no stage here runs: the two-host tests (plain build
# only), the threading test (TSan build only), rdma_fabric (its launcher tests run
# in the plain build only; its logic is in rdma_fabric_core, unit-tested here),
# four benchmarks (no test runs them) and unit_headers_alone (a compile-time check,
# each public header compiled on its own: the plain build's unit stage has it; run
# here it would only compile 32 files again).
configure "$asan_dir" clang++-16 address,undefined -DASIO_RDMA_FUZZ=ON \
  "-DASIO_RDMA_EXCLUDE_FROM_ALL=two_hosts_test;integration_threads;rdma_fabric;raw_rate;crc32c_rate;http_get_rate;rsocket_lat;unit_headers_alone"
cmake --build "$asan_dir" -j "$jobs"
# GCC, not clang 16: clang before 17 caches thread_local addresses across
# co_await (llvm-project issue 63022), so a coroutine resumed on another
# thread uses the first thread's Asio recycling allocator: a real race in the
# compiled program that TSan reports, but not one of this project.
configure "$tsan_dir" g++ thread -DASIO_RDMA_BUILD_APPS=OFF
cmake --build "$tsan_dir" -j "$jobs" --target integration_threads
echo "=== sanitized builds: $((SECONDS - start)) s"

status=0
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
tally() { # label: adds up every CTest summary line in $log
  local line found=0
  while read -r line; do
    if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
      failed=$((failed + BASH_REMATCH[1]))
      passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
      found=1
    fi
  done < <(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" || true)
  if [[ $found -eq 0 ]]; then
    echo "=== $1: no test result found"
    status=1
  fi
}
run() { # label, command...
  local label=$1 t0=$SECONDS
  shift
  echo "=== $label: $*"
  if ! "$@" 2>&1 | tee "$log"; then
    echo "=== $label: FAILED"
    status=1
  fi
  echo "=== $label: $((SECONDS - t0)) s"
  tally "$label"
}

run asan-unit ctest --test-dir "$asan_dir" -L unit -E '^unit_headers_alone$' --output-on-failure
if [[ $(id -u) -ne 0 ]]; then
  echo "=== asan-netns: FAILED: the raw-packet tests create network namespaces and need root"
  status=1
else
  run asan-netns ctest --test-dir "$asan_dir" -L netns --output-on-failure
fi
# Each fuzzer is one process for a fixed time: two at once on two cores.
run fuzz ctest --test-dir "$asan_dir" -L fuzz -j 2 --output-on-failure
# One VM boot: the ASan build's integration tests (two at a time, as in test.sh), then
# the TSan build's. The threading test runs in the TSan (GCC) build only: built by
# clang 16 it hits the thread_local miscompilation described above.
# The soak test's point here is memory errors, not its figure: 10^5 messages.
# rdma_fabric's launcher tests (mpirun, Slurm) run in the plain integration
# stage only: they would add about 5 minutes, and Open MPI does not free all
# it allocates (it ships suppression files for its own leaks), which LSan
# would report. rdma_fabric's logic runs under ASan in its unit tests, and
# its measuring is rdma_bench's framework client, sanitized here.
run sanitized-integration test/vm/run.sh --timeout 3000 \
  --env ASAN_OPTIONS --env UBSAN_OPTIONS --env LSAN_OPTIONS --env TSAN_OPTIONS \
  --env ASIO_RDMA_TEST_VOLUME \
  --env ASIO_RDMA_SOAK_MESSAGES=100000 -- \
  sh -c 'ctest --test-dir "$1" -L integration -E "^(integration_threads|integration_fabric_.*)\$" -j 2 --output-on-failure; a=$?
         ctest --test-dir "$2" -R "^integration_threads\$" --output-on-failure; t=$?
         [ $a -eq 0 ] && [ $t -eq 0 ]' sh "$asan_dir" "$tsan_dir"

echo "=== sanitizer stage: $((SECONDS - start)) s"
total=$((passed + failed))
[[ $failed -eq 0 && $status -eq 0 ]] || status=1
echo "sanitizer stage: $((total ? 100 * passed / total : 0))% tests passed, $failed tests failed out of $total"
exit $status
