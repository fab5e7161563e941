#!/usr/bin/env bash
# The memory table of docs/runtime.md: what one GPU holds (shard-compile
# --memory-report, the static memory plan; nothing runs) for the real configs
# of examples/models on the cuda backend at seq 4096, one sequence per dp
# rank, with FSDP (the default over dp) and with --dp-replicate, without and
# with --activation-checkpointing; then, in a second table, the same with
# checkpointing and --cpu-offload (the GPU's side and the pinned host memory
# of each rank). Figures in GB (1e9 bytes).
#
# usage: bench/memory_table.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build}/bin
models=$root/examples/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# model config, plan, tp, dp values
ROWS=(
  "Llama-3.2-1B llama-3.2-1b.json llama 1 1 4"
  "Qwen2.5-7B qwen2.5-7b.json qwen2 4 1 2 8"
  "Llama-3.1-70B llama-3.1-70b.json llama 8 1 2 4 8"
)

# Prints "persistent temporaries total gathered_max host_pinned" in GB for
# one compile (host_pinned 0.0 without --cpu-offload).
figures() {
  local cfg=$1 plan=$2 tp=$3 dp=$4
  shift 4
  "$bin/shard-compile" "$models/$cfg" --tp-plan="$plan" --tp-size="$tp" --dp-size="$dp" \
    --batch "$dp" --seq 4096 --backend=cuda --emit=obj -o "$work/step.o" \
    --memory-report "$work/mem.json" "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  python3 - "$work/mem.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
gb = lambda b: "%.1f" % (b / 1e9)
print(gb(m["persistent_bytes"]), gb(m["temporaries_peak_bytes"]), gb(m["total_bytes"]),
      gb(m["gathered_params_max_bytes"]), gb(m.get("host", {}).get("pinned_bytes", 0)))
EOF
}

echo "| model | tp x dp | dp mode | persistent | temporaries | total | with checkpointing: temporaries | total |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for row in "${ROWS[@]}"; do
  read -r name cfg plan tp dps <<<"$row"
  for dp in $dps; do
    modes=(fsdp)
    [ "$dp" -gt 1 ] && modes=(fsdp replicate)
    for mode in "${modes[@]}"; do
      flags=()
      [ "$mode" = replicate ] && flags=(--dp-replicate)
      [ "$dp" = 1 ] && label="-" || label=$mode
      read -r p t total _ < <(figures "$cfg" "$plan" "$tp" "$dp" "${flags[@]}")
      read -r _ tc totalc _ < <(figures "$cfg" "$plan" "$tp" "$dp" "${flags[@]}" \
                                  --activation-checkpointing)
      echo "| $name | $tp x $dp | $label | $p | $t | $total | $tc | $totalc |"
    done
  done
done

echo
echo "With --activation-checkpointing and --cpu-offload (FSDP over dp):"
echo
echo "| model | tp x dp | GPU: persistent | temporaries | total | host, pinned |"
echo "| --- | --- | --- | --- | --- | --- |"
for row in "${ROWS[@]}"; do
  read -r name cfg plan tp dps <<<"$row"
  for dp in $dps; do
    read -r p t total _ host < <(figures "$cfg" "$plan" "$tp" "$dp" --activation-checkpointing \
                                   --cpu-offload)
    echo "| $name | $tp x $dp | $p | $t | $total | $host |"
  done
done
