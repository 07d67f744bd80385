#!/bin/sh
# run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS
# Runs a libFuzzer target for SECONDS on the seed corpus (read only) plus the
# inputs it found before (WORK_DIR/corpus). Exits non-zero on any finding;
# the input that caused it is left in WORK_DIR (crash-*, leak-*, timeout-*).
set -eu
fuzzer=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work/corpus"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus" "$seeds"
