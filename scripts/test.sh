#!/usr/bin/env bash
# Runs every test of the project:
#   1. unit tests (no device) on this machine;
#   2. netns tests (raw packets on veth pairs in namespaces the tests create;
#      needs root) on this machine;
#   3. packaging (scripts/test_packaging.sh): install, CMake package,
#      pkg-config, .deb packages, consumer projects built against them;
#   4. integration tests against real verbs: on the local RDMA device if
#      there is one, otherwise inside the SoftRoCE VM (test/vm/run.sh); then
#      those labelled iwarp again on SoftiWARP (siw0, always in the VM);
#   5. two-host tests: two SoftRoCE guests on one virtual wire, with faults
#      (a host killed, a link cut) injected mid-run (test/vm/two_hosts).
#   6. all of it again under ASan+UBSan+LSan, the threading tests under TSan,
#      and every fuzz target for a bounded time (scripts/test_sanitized.sh).
# Nothing is skipped: a missing device, VM or privilege is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}

# Every stage prints "=== label: N s" when it ends, and the total at the end,
# so each run shows where CI's time goes.
t0=$SECONDS
scripts/setup.sh
echo "=== setup: $((SECONDS - t0)) s"
t0=$SECONDS
# Everything a stage below runs: not the four micro-benchmarks that no test runs
# (bench/RESULTS.md says how each is run by hand).
ASIO_RDMA_EXCLUDE_FROM_ALL="raw_rate;crc32c_rate;http_get_rate;rsocket_lat" scripts/build.sh
echo "=== build: $((SECONDS - t0)) s"

status=0
passed=0
failed=0
log=$(mktemp)
failures=$(mktemp) # ctest's list of failed tests, per stage, repeated at the end
trap 'rm -f "$log" "$failures"' EXIT
evidence='FAIL|error:|watch:|rank stderr:|no answer|no result|TX timeout|not responding|Killed|exit status|\[[AB]\] +(#[0-9]|Thread |ESTAB|FIN|[0-9]+ \[<0>\])'
run() { # label, command...
  local label=$1 t0=$SECONDS
  shift
  echo "=== $label: $*"
  if ! "$@" 2>&1 | tee "$log"; then
    echo "=== $label: FAILED"
    status=1
    # ... and what a failure said about itself (failure lines; test/fabric/two_hosts.sh's
    # watch: a stalled rank's stacks, stuck TCP connections, host B's ranks' stderr).
    grep -E "$evidence" "$log" | tail -n 80 | sed "s/^/$label evidence: /" >> "$failures" || true
  fi
  # CI keeps only the end of a long log: name what failed where it is kept.
  grep -E '^\s+[0-9]+ - \S+ \(' "$log" | sed "s/^/$label: /" >> "$failures" || true
  echo "=== $label: $((SECONDS - t0)) s"
  # Add up ctest's "N% tests passed, F tests failed out of T".
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1]))
    passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  else
    echo "=== $label: no test result found"
    status=1
  fi
}

run unit ctest --test-dir "$build_dir" -L unit --output-on-failure
if [[ $(id -u) -ne 0 ]]; then
  echo "=== netns: FAILED: the raw-packet tests create network namespaces and need root"
  status=1
else
  run netns ctest --test-dir "$build_dir" -L netns --output-on-failure
fi
run packaging scripts/test_packaging.sh
# One VM boot for all integration tests; CTest's own per-test timeouts apply. Two at a
# time: one leaves the guest's two vCPUs half idle (test/CMakeLists.txt says which tests
# run alone).
run integration test/vm/run.sh --timeout 3000 -- \
  ctest --test-dir "$build_dir" -L integration -j 2 --output-on-failure
# iWARP: the tests labelled iwarp on SoftiWARP, in one VM boot (docs/devices.md says
# what iWARP runs and what it refuses; the rest of the integration label is issue 26's).
# A fifth of the volume of the volume-heavy tests (scaled() in test/common/rdma_test.hpp),
# as under the sanitizers: every code path they take is taken in that fifth; the
# integration stage runs them whole on rxe0, and here the point is iWARP's behaviour.
run iwarp test/vm/run.sh --vm --device siw --timeout 900 --env ASIO_RDMA_TEST_VOLUME=0.2 -- \
  ctest --test-dir "$build_dir" -L iwarp -j 2 --output-on-failure

# Two hosts: every CTest test here boots its own pair of SoftRoCE guests on a
# virtual wire (test/vm/two_hosts), so it runs from this machine, one at a time.
run two_hosts ctest --test-dir "$build_dir" -L two_hosts -V
# All of it again under sanitizers, plus the fuzz targets (its own builds).
run sanitized scripts/test_sanitized.sh

if [[ $status -eq 0 && $failed -eq 0 ]]; then
  echo "=== all test groups passed"
else
  echo "=== some test group FAILED"
  cat "$failures"
  status=1
fi
echo "$passed passed, $failed failed"
echo "=== total: $SECONDS s"
exit $status
