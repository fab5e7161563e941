#!/usr/bin/env bash
# Wall time of `shard-opt --tp-plan=llama --tp-size=8 --sequence-parallel` on
# the imported Llama-3.1-70B graph, parse to print (goal: under 0.5 s), and how
# it grows from 10 to 80 layers (goal: linear: the time per layer stays flat).
# The median of RUNS runs is printed; nothing is asserted.
#
#   bench/shard_opt.sh [BUILD_DIR] [RUNS]     defaults: build, 9
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
runs=${2:-9}
config=$here/examples/models/llama-3.1-70b.json
for tool in shard-import shard-opt; do
  [[ -x $build/bin/$tool ]] || { echo "bench/shard_opt.sh: no $build/bin/$tool (build first)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# median of the wall times (ms) of running "$@" $runs times
median_ms() {
  local times=()
  for ((i = 0; i < runs; ++i)); do
    local start end
    start=$(date +%s%N)
    "$@" >/dev/null
    end=$(date +%s%N)
    times+=($(((end - start) / 1000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

start_ms=$(median_ms "$build/bin/shard-opt" --help)
printf 'shard-opt --tp-plan=llama --tp-size=8 --sequence-parallel on Llama-3.1-70B (batch 1, seq 4096)\n'
printf 'process start alone (loading libMLIR/libLLVM): %s ms\n' "$start_ms"
printf '%8s %12s %22s %12s\n' layers "wall ms" "(wall-start) per layer" "vs 10 layers"
base=""
for layers in 10 20 40 80; do
  sed "s/\"num_hidden_layers\": 80/\"num_hidden_layers\": $layers/" "$config" > "$work/c$layers.json"
  "$build/bin/shard-import" "$work/c$layers.json" --batch 1 --seq 4096 -o "$work/m$layers.mlir"
  ms=$(median_ms "$build/bin/shard-opt" --tp-plan=llama --tp-size=8 --sequence-parallel \
       "$work/m$layers.mlir" -o "$work/out.mlir")
  per=$(awk -v m="$ms" -v s="$start_ms" -v l="$layers" 'BEGIN {printf "%.2f", (m - s) / l}')
  [[ -n $base ]] || base=$per
  ratio=$(awk -v p="$per" -v b="$base" 'BEGIN {printf "%.2f", p / b}')
  printf '%8d %12s %22s %12s\n' "$layers" "$ms" "$per" "$ratio"
done
printf 'goals: 80 layers under 500 ms; the time per layer flat (ratio near 1.0 = linear)\n'
