#!/usr/bin/env bash
# The main job on a bundled default: imports the real Hugging Face config of
# Qwen2.5-0.5B (../shared/models, or examples/ when run elsewhere), shows its
# size, shards it for tp=2 with sequence parallel and prints the per-rank
# report and the first layer of the per-rank graph with its collectives.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" build >/dev/null
bin=$root/build/bin
config=$root/../shared/models/qwen2.5-0.5b.json
[[ -f $config ]] || config=$root/examples/qwen2.5-0.5b.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== shard-import $(basename "$config") --batch 1 --seq 1024 --summary"
"$bin/shard-import" "$config" --batch 1 --seq 1024 --summary -o "$work/model.mlir"
echo
echo "== shard-opt --tp-plan=qwen2 --tp-size=2 --sequence-parallel --report"
"$bin/shard-opt" --tp-plan=qwen2 --tp-size=2 --sequence-parallel --report \
  "$work/model.mlir" -o "$work/tp2.mlir"
echo
echo "== per-rank graph, embedding and layer 0 (of $(grep -c '"nn\.' "$work/tp2.mlir") ops)"
grep -E 'model\.embed_tokens"|model\.rotary_emb"|model\.layers\.0\.' "$work/tp2.mlir" |
  grep -v 'func.func' | sed -E 's/ \{[^}]*nn\.module = ("[^"]*")[^}]*\}/ {nn.module = \1}/' | cut -c1-160
