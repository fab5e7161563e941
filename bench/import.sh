#!/usr/bin/env bash
# Import time of the 80-layer Llama-3.1-70B config (goal: well under 100 ms),
# end to end (process start, config, MLIR context, graph, nn-verify, printing)
# and per phase as shard-import --timing reports it. Prints numbers; asserts
# nothing (timings depend on the machine).
#
#   bench/import.sh [BUILD_DIR] [RUNS]     defaults: build, 20
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
runs=${2:-20}
tool=$build/bin/shard-import
config=$here/examples/models/llama-3.1-70b.json
[[ -x $tool ]] || { echo "bench/import.sh: no $tool (build first)" >&2; exit 1; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
walls=()
phases=()
for ((i = 0; i < runs; ++i)); do
  start=$(date +%s%N)
  phases+=("$("$tool" "$config" --batch 1 --seq 4096 --timing -o "$out" 2>&1 >/dev/null)")
  end=$(date +%s%N)
  walls+=($(((end - start) / 1000)))
done
# Process start alone (loading libMLIR and libLLVM), for comparison.
starts=()
for ((i = 0; i < runs; ++i)); do
  start=$(date +%s%N)
  "$tool" --help >/dev/null
  end=$(date +%s%N)
  starts+=($(((end - start) / 1000)))
done
start_median=$(printf '%s\n' "${starts[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
sorted=$(printf '%s\n' "${walls[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(((runs + 1) / 2))p")
best=$(echo "$sorted" | head -1)
echo "llama-3.1-70b.json: $(grep -c '"nn\.' "$out") nn ops, $(grep -o 'nn.param' "$out" | wc -l) parameters, $(wc -c <"$out") bytes of MLIR"
printf 'wall time over %d runs: median %.1f ms, best %.1f ms (goal: well under 100 ms)\n' \
  "$runs" "$(echo "$median / 1000" | bc -l)" "$(echo "$best / 1000" | bc -l)"
printf 'of which process start (shard-import --help): median %.1f ms\n' \
  "$(echo "$start_median / 1000" | bc -l)"
echo "last run, in process: ${phases[-1]}"
