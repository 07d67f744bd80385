#!/bin/sh
# run_fuzzer.sh FUZZER SEED_DIR WORK_DIR SECONDS
# Runs a libFuzzer target for SECONDS on the seed corpus (read only) plus the
# inputs it found before (WORK_DIR/corpus). Exits non-zero on any finding;
# the input that caused it is left in WORK_DIR (crash-*, leak-*, timeout-*).
# A single input may take 30 s (every decoder is linear in its input of a few
# KiB; the margin is for a loaded machine, where a 10 s limit fired spuriously).
set -eu
fuzzer=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work/corpus"
exec "$fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus" "$seeds"
