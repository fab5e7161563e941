#!/usr/bin/env bash
# Checks that two builds of shard-compile lower the same steps to the same
# output, byte for byte: the partitioned IR (--emit=mlir), the emitted calls
# (--emit=llvm), the memory report (--memory-report, JSON and summary), and
# every refusal (its message and exit status). For a refactor of the
# lowering (issue 40: the buffer plan out of lower-to-runtime), run it with
# the starting commit's build and the changed one.
#
# Configs: the tiny ones of test/e2e/configs and examples/, the real ones of
# examples/ and, when present, of ../shared/models (gemma3, NemotronH).
# Meshes: tp1, tp2 with sequence parallelism, dp2 x tp2. Per config and
# mesh: cpu --emit=mlir; cpu --emit=llvm with --memory-report; with
# --keep-logits; with --activation-checkpointing; cuda --emit=llvm with
# --memory-report; cuda with --cpu-offload.
#
# usage: bench/lowering_identical.sh BASE_BIN_DIR NEW_BIN_DIR
#   (e.g. /work/base-bin build/bin); prints one line per difference and a
#   count; exit status 1 when any output differs.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "${1:?usage: $0 BASE_BIN_DIR NEW_BIN_DIR}" && pwd)
new=$(cd "${2:?usage: $0 BASE_BIN_DIR NEW_BIN_DIR}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# config (relative to the repository, or absolute) and its tp plan
configs=(
  "test/e2e/configs/tiny-qwen2.json qwen2"
  "test/e2e/configs/tiny-qwen3.json qwen3"
  "test/e2e/configs/tiny-llama.json llama"
  "test/e2e/configs/tiny-gemma3.json gemma3"
  "test/e2e/configs/tiny-nemotron_h.json nemotron_h"
  "examples/tiny-qwen2-bpe.json qwen2"
  "examples/tiny-qwen2-bytes.json qwen2"
  "examples/qwen2.5-0.5b.json qwen2"
  "examples/llama-3.2-1b.json llama"
)
shared=$root/../shared/models
[ -f "$shared/gemma-3-1b-it.json" ] && configs+=("$shared/gemma-3-1b-it.json gemma3")
[ -f "$shared/nemotron-h-8b-base-8k.json" ] && configs+=("$shared/nemotron-h-8b-base-8k.json nemotron_h")

meshes=("--tp-size=1" "--tp-size=2 --sequence-parallel" "--tp-size=2 --dp-size=2")
variants=(
  "--emit=mlir"
  "--emit=llvm --memory-report=R.json"
  "--emit=llvm --keep-logits"
  "--emit=llvm --activation-checkpointing"
  "--backend=cuda --emit=llvm --memory-report=R.json"
  "--backend=cuda --cpu-offload --emit=llvm --memory-report=R.json"
)

# Runs one compile with `bin` in folder `dir`: its output X, its report
# R.json, its stdout+stderr and exit status in log.
run() {
  local bin=$1 dir=$2 cfg=$3 plan=$4 mesh=$5 variant=$6
  mkdir -p "$dir"
  # shellcheck disable=SC2086 # mesh and variant are flag lists
  (cd "$dir" && "$bin/shard-compile" "$cfg" --tp-plan="$plan" $mesh --batch 2 --seq 16 \
     $variant -o X >log 2>&1; echo "rc=$?" >>log)
}

runs=0 differ=0
for c in "${configs[@]}"; do
  read -r cfg plan <<<"$c"
  case $cfg in /*) ;; *) cfg=$root/$cfg ;; esac
  for mesh in "${meshes[@]}"; do
    for variant in "${variants[@]}"; do
      id=$(printf '%s' "$cfg $mesh $variant" | md5sum | cut -c1-12)
      run "$base" "$work/base/$id" "$cfg" "$plan" "$mesh" "$variant"
      run "$new" "$work/new/$id" "$cfg" "$plan" "$mesh" "$variant"
      runs=$((runs + 1))
      if ! diff -r "$work/base/$id" "$work/new/$id" >/dev/null; then
        differ=$((differ + 1))
        echo "DIFFERS: $(basename "$cfg") $mesh $variant"
      fi
    done
  done
done
refused=$(grep -l 'rc=[1-9]' "$work"/base/*/log | wc -l)
echo "$runs compiles compared ($refused refused, refusals compared too), $differ differ"
[ "$differ" = 0 ]
