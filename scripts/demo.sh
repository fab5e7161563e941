#!/usr/bin/env bash
# The main job on bundled defaults:
#  1. import the real Hugging Face config of Qwen2.5-0.5B and show its
#     tensor-parallel (tp=2) per-rank graph and memory/traffic report;
#  2. compile a tiny byte-level model of the Qwen2 architecture into a
#     training executable (tp=2 with sequence parallel) and train it on a
#     bundled text on 2 CPU ranks under MPI: the loss falls.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" build >/dev/null
bin=$root/build/bin
config=$root/../shared/models/qwen2.5-0.5b.json
[[ -f $config ]] || config=$root/examples/qwen2.5-0.5b.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== 1. shard-import qwen2.5-0.5b.json --batch 1 --seq 1024 --summary"
"$bin/shard-import" "$config" --batch 1 --seq 1024 --summary -o "$work/model.mlir"
echo
echo "== shard-opt --tp-plan=qwen2 --tp-size=2 --report  (per rank; f32)"
"$bin/shard-opt" --tp-plan=qwen2 --tp-size=2 --report "$work/model.mlir" -o "$work/tp2.mlir" 2>&1
nn=$(grep -c '"nn\.' "$work/tp2.mlir")
coll=$(grep -cE 'shard\.(all_|reduce_scatter)' "$work/tp2.mlir")
echo
echo "== per-rank graph: the embedding and layer 0 ($nn nn ops and $coll collectives in all)"
grep -E 'model\.embed_tokens"|model\.rotary_emb"|model\.layers\.0[".]' "$work/tp2.mlir" |
  grep -v 'func.func' | sed -E 's/ \{[^}]*nn\.module = ("[^"]*")[^}]*\}/ {nn.module = \1}/'

echo
echo "== 2. shard-compile examples/tiny-qwen2-bytes.json --tp-plan=qwen2 --tp-size=2 --sequence-parallel"
"$bin/shard-compile" "$root/examples/tiny-qwen2-bytes.json" --tp-plan=qwen2 --tp-size=2 \
  --sequence-parallel --batch 8 --seq 64 -o "$work/train"
"$bin/shard-tokens" "$root/examples/data/shard-tales.txt" -o "$work/tales.tok"
echo
echo "== mpirun -np 2 train --data tales.tok --steps 60 --lr 3e-3 --max-grad-norm 1"
mpirun --allow-run-as-root --oversubscribe -np 2 "$work/train" --data "$work/tales.tok" \
  --steps 60 --lr 3e-3 --max-grad-norm 1.0 --log-every 5
