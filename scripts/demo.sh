#!/usr/bin/env bash
# The main job on bundled defaults:
#  1. import the real Hugging Face config of Qwen2.5-0.5B and show its
#     tensor-parallel (tp=2) per-rank graph and memory/traffic report;
#  2. tokenize the bundled text with the bundled tokenizer.json (byte-level
#     BPE as Qwen2 ships it), a training part and a held-out part;
#  3. compile a tiny model of the Qwen2 architecture into a training
#     executable (tp=2 with sequence parallel) and train it on 2 CPU ranks
#     under MPI with warmup and cosine decay, evaluating on the held-out
#     part; the metrics (JSONL) and the curve (SVG) stay in demo-out/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" build >/dev/null
bin=$root/build/bin
config=$root/examples/models/qwen2.5-0.5b.json
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
out=$root/demo-out # what the run leaves for the user: metrics and the picture
mkdir -p "$out"
rm -f "$out/metrics.jsonl"
tokenizer=$root/examples/tokenizer/tokenizer.json
echo "== 2. shard-tokens --tokenizer examples/tokenizer/tokenizer.json (byte-level BPE, 512 ids)"
# The bundled text: its first 128 lines to train on, the last 15 held out.
head -n 128 "$root/examples/data/shard-tales.txt" >"$work/train.txt"
tail -n 15 "$root/examples/data/shard-tales.txt" >"$work/heldout.txt"
"$bin/shard-tokens" --windows --tokenizer "$tokenizer" "$work/train.txt" -o "$out/train.tok"
"$bin/shard-tokens" --windows --tokenizer "$tokenizer" "$work/heldout.txt" -o "$out/heldout.tok"
echo
echo "== 3. shard-compile examples/tiny-qwen2-bpe.json --tp-plan=qwen2 --tp-size=2 --sequence-parallel"
"$bin/shard-compile" "$root/examples/tiny-qwen2-bpe.json" --tp-plan=qwen2 --tp-size=2 \
  --sequence-parallel --batch 8 --seq 64 -o "$work/train"
echo
echo "== mpirun -np 2 train: 300 steps, warmup 20 then cosine to 1e-3, eval every 50 steps"
mpirun --allow-run-as-root --oversubscribe -np 2 "$work/train" --data "$out/train.tok" \
  --steps 300 --lr 1e-2 --lr-schedule cosine --warmup-steps 20 --min-lr 1e-3 --max-grad-norm 1.0 \
  --eval-data "$out/heldout.tok" --eval-every 50 --eval-batches 2 \
  --metrics "$out/metrics.jsonl" --log-every 25
echo
"$bin/shard-plot" "$out/metrics.jsonl" -o "$out/curve.svg" \
  --title "tiny Qwen2, tp=2 + sequence parallel: loss, eval loss and lr"
echo "demo: metrics in $out/metrics.jsonl, the training curve in $out/curve.svg"
