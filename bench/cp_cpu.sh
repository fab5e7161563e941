#!/usr/bin/env bash
# Context parallelism beside tensor and data parallelism on the CPU: the
# same model (bench/train_cpu.json: a Llama of hidden 512, 4 layers) and the
# same global batch (2 sequences of SEQ tokens) on 2 ranks as cp 2, tp 2 and
# dp 2, run in ROUNDS alternating rounds (each mesh once per round, so a
# busy host slows all alike); prints each mesh's median step time over the
# rounds (each run's steps after the first averaged), its ratio to dp 2's,
# and from the memory report the activations' peak per rank and, for cp 2,
# the attention's K/V bytes per layer and rank. Nothing asserted.
#
#   bench/cp_cpu.sh [BUILD_DIR] [SEQ] [STEPS] [ROUNDS]   defaults: build, 2048, 3, 3
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
seq=${2:-2048}
steps=${3:-3}
rounds=${4:-3}
config=$here/bench/train_cpu.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe)
"$build/bin/shard-tokens" --windows "$here/examples/data/shard-tales.txt" -o "$work/data.tok" >/dev/null
meshes=("cp2 --cp-size=2" "tp2 --tp-size=2" "dp2 --dp-size=2")
for m in "${meshes[@]}"; do
  read -r name flags <<<"$m"
  # shellcheck disable=SC2086 # flags are words
  "$build/bin/shard-compile" "$config" --tp-plan=llama $flags --batch 2 --seq "$seq" \
    --memory-report "$work/$name.json" -o "$work/$name" 2>"$work/$name.report"
done
printf 'host: %s, %d cores; batch 2 x seq %d, %d steps per run, %d rounds\n' \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" "$(nproc)" "$seq" "$steps" "$rounds"
# ms per step of a driver log: the steps after the first, averaged.
step_ms() { awk '/^step/ && $2 !~ /^1\// {for (i = 2; i <= NF; ++i) if ($i == "ms") {s += $(i-1); n++}}
                 END {if (n) printf "%.1f\n", s / n; else print "nan"}' "$1"; }
for r in $(seq 1 "$rounds"); do
  for m in "${meshes[@]}"; do
    read -r name _ <<<"$m"
    "${mpirun[@]}" -np 2 "$work/$name" --data "$work/data.tok" --steps "$steps" --lr 1e-3 --max-grad-norm 1 \
      >"$work/$name.$r.log" 2>&1
    step_ms "$work/$name.$r.log" >>"$work/$name.ms"
  done
done
median() { sort -g "$1" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ref=$(median "$work/dp2.ms")
printf '%-5s %12s %10s %22s %s\n' mesh "ms/step" "vs dp2" "activations/rank GiB" "rounds (ms)"
for m in "${meshes[@]}"; do
  read -r name _ <<<"$m"
  ms=$(median "$work/$name.ms")
  act=$(awk -F'[:,]' '/"activations"/ {printf "%.3f", $2 / 2^30}' "$work/$name.json")
  printf '%-5s %12s %10s %22s %s\n' "$name" "$ms" "$(awk -v a="$ms" -v b="$ref" 'BEGIN {printf "%.2f", a / b}')" \
    "$act" "$(tr '\n' ' ' <"$work/$name.ms")"
done
awk -F'[:,]' '/"kv_all_gather_bytes_per_layer"/ {g = $2} /"kv_grad_reduce_scatter_bytes_per_layer"/ {s = $2}
  END {printf "cp2 attention per layer and rank: K/V all-gather %d bytes (forward, and again in the backward), dK/dV reduce-scatter %d bytes\n", g, s}' "$work/cp2.json"
