#!/usr/bin/env bash
# The context-parallel memory table of docs/plans.md: what one GPU holds
# (shard-compile --memory-report, the static memory plan; nothing runs) for
# Llama-3.1-8B at seq 131072 on 8 GPUs (cp 8; tp 2 x cp 4) and Llama-3.1-70B
# at seq 131072 on 32 GPUs (tp 8 x cp 4), one sequence per step, with
# activation checkpointing, and cp 1 beside them where it is given, then the
# bytes each rank receives per attention layer over cp. Figures in GB (1e9
# bytes). The backend is an argument so the table can be made where the
# cuda backend is not built (cpu: fp32 activations, no compute copies).
#
# usage: bench/cp_memory_table.sh [BUILD_DIR] [BACKEND]   (defaults: build, cuda)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build}/bin
backend=${2:-cuda}
models=$root/examples/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SEQ=131072

# name, config, tp, cp
ROWS=(
  "Llama-3.1-8B llama-3.1-8b.json 8 1"
  "Llama-3.1-8B llama-3.1-8b.json 1 8"
  "Llama-3.1-8B llama-3.1-8b.json 2 4"
  "Llama-3.1-70B llama-3.1-70b.json 8 4"
)
printf '| model | mesh (GPUs) | params | grads | moments | bf16 copies | activations (peak live) | temporaries (planned) | scratch | total | K/V all-gather per layer | dK/dV reduce-scatter per layer |\n'
printf '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
for row in "${ROWS[@]}"; do
  read -r name cfg tp cp <<<"$row"
  "$bin/shard-compile" "$models/$cfg" --tp-plan=llama --tp-size="$tp" --cp-size="$cp" \
    --batch 1 --seq "$SEQ" --backend="$backend" --activation-checkpointing --emit=obj \
    -o "$work/step.o" --memory-report "$work/mem.json" >"$work/log" 2>&1 \
    || { cat "$work/log" >&2; exit 1; }
  python3 - "$work/mem.json" "$name" "$tp" "$cp" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
name, tp, cp = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
gb = lambda b: "%.1f" % (b / 1e9)
p, c = m["persistent"], m.get("cp_attention", {})
mesh = " x ".join(s for s in (("tp %d" % tp) if tp > 1 else "", ("cp %d" % cp) if cp > 1 else "") if s)
print("| %s | %s (%d) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
    name, mesh, tp * cp, gb(p["params"]), gb(p["grads"]), gb(p["moments"]),
    gb(p["compute_copies"]), gb(m["live_at_peak"]["activations"]), gb(m["temporaries_peak_bytes"]),
    gb(m["workspace_bytes"]), gb(m["total_bytes"]),
    ("%.2f" % (c["kv_all_gather_bytes_per_layer"] / 1e9)) if c else "-",
    ("%.2f" % (c["kv_grad_reduce_scatter_bytes_per_layer"] / 1e9)) if c else "-"))
PY
done
