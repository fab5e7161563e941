#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: run.sh FUZZER SEEDS SECONDS.
# The committed seeds (SEEDS, never written to) are replayed first, so every
# regression input kept there runs each time; new inputs go to a scratch
# corpus under the build folder. SHARD_FUZZ_SECONDS overrides SECONDS. Prints the executions and exits non-zero on
# any crash, leak, timeout or sanitizer report, naming the saved input.
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=${SHARD_FUZZ_SECONDS:-$3}
name=$(basename "$fuzzer")
work=$(dirname "$fuzzer")/../fuzz-work/$name
mkdir -p "$work/corpus" "$work/artifacts"
log=$work/log.txt
if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
     "$work/corpus" "$seeds" >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "FAIL: $name: the input that failed is in $work/artifacts/;" \
       "once fixed, copy it into $seeds as a regression input" >&2
  exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
echo "$name: ${runs:-?} executions in ${seconds} s, $(ls "$seeds" | wc -l) seeds, no failure"
