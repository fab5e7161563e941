#!/usr/bin/env bash
# The bf16 cpu program (--param-dtype bf16) through the driver, on the
# tiny Llama at dp2 x tp2 (FSDP):
#   - a resume is bit for bit the uninterrupted run: 2 steps and --save,
#     then --load and steps 3-4 print the same losses and grad norms as a
#     4-step run (the save holds the fp32 masters and moments; the load's
#     copy in rounds the bf16 compute copies from them again);
#   - gradient accumulation (--micro-batch 1: 2 micro-batches of 1 per
#     rank) is the whole-batch bf16 step within 2^-5 relative (loss and
#     grad norm), the bf16 parity tolerance of test/e2e/CMakeLists.txt: the
#     micro-batches' GEMMs round other partial products (measured 7e-6
#     and 6e-5);
#   - the bf16 run trains: its loss falls by 0.5 over 4 steps (without the
#     compute copies' refresh after AdamW the forward would not change).
#
# usage: bf16.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
TRAIN=(--data "$W/tokens.tok" --lr 1e-2 --max-grad-norm 1 --seed 3)
MESH=(--tp-size=2 --dp-size=2 --param-dtype bf16)
compile whole "$CONFIGS/tiny-llama.json" llama "${MESH[@]}" || fail "compile"
run 4 "$W/whole" "${TRAIN[@]}" --steps 4 >"$W/whole.log" 2>&1 || { cat "$W/whole.log"; fail "4-step run"; }
steps "$W/whole.log" >"$W/whole.steps"
[ "$(wc -l <"$W/whole.steps")" = 4 ] || { cat "$W/whole.log"; fail "not 4 step lines"; }
awk '{ if (NR == 1) a = $2; b = $2 } END { exit !(b < a - 0.5) }' "$W/whole.steps" \
  || { cat "$W/whole.steps"; fail "the bf16 loss does not fall"; }

run 4 "$W/whole" "${TRAIN[@]}" --steps 2 --save "$W/ck.safetensors" >"$W/first.log" 2>&1 \
  || { cat "$W/first.log"; fail "2-step run with --save"; }
run 4 "$W/whole" "${TRAIN[@]}" --steps 4 --load "$W/ck.safetensors" >"$W/resumed.log" 2>&1 \
  || { cat "$W/resumed.log"; fail "resumed run"; }
steps "$W/resumed.log" | diff - <(tail -2 "$W/whole.steps") \
  || fail "the resumed steps 3-4 differ from the uninterrupted run's"
echo "ok: resume bit for bit (steps 3-4)"

compile micro "$CONFIGS/tiny-llama.json" llama "${MESH[@]}" --micro-batch 1 || fail "compile micro"
run 4 "$W/micro" "${TRAIN[@]}" --steps 4 >"$W/micro.log" 2>&1 || { cat "$W/micro.log"; fail "micro-batch run"; }
read -r n loss norm <<<"$(max_rel "$W/micro.log" "$W/whole.log")" || fail "micro-batch steps"
awk -v l="$loss" -v g="$norm" 'BEGIN { exit !(l <= 2^-5 && g <= 2^-5) }' \
  || { paste "$W/micro.log" "$W/whole.log" | grep '^step'; fail "accumulation: loss $loss, grad norm $norm relative"; }
echo "ok: 2 micro-batches per rank vs the whole batch over $n steps: loss $loss, grad norm $norm relative (tolerance 2^-5)"
echo PASS
