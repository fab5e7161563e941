#!/usr/bin/env bash
# --eval-data on compiled programs (issue 18): the compiled step branches
# to the optimizer op right after the loss when asked for the forward only
# (srt_step_options.forward_only), so:
#   1. training with evaluations gives exactly the losses of training without;
#   2. the eval loss after step 3 is the loss a training step reports on the
#      same batch from the same weights (a run loaded at step 3 whose step-4
#      batch is the eval batch);
#   3. tp2 and dp2 x tp1 (FSDP-less replicated dp) give the tp1 eval losses
#      within 1e-5.
# usage: eval.sh CONFIG BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIG=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=16
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
evals() { awk '/^eval step/{print $3, $5}' "$1"; }
compile tp1 "$CONFIG" qwen2 --tp-size=1 || exit 1
compile tp2 "$CONFIG" qwen2 --tp-size=2 || exit 1
compile dp2 "$CONFIG" qwen2 --tp-size=1 --dp-size=2 || exit 1
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/train.bin" >/dev/null || fail "shard-tokens"
head -c 6000 "$TEXT" >"$W/ev.txt"
"$BIN/shard-tokens" --windows "$W/ev.txt" -o "$W/ev.bin" >/dev/null || fail "shard-tokens eval"
COMMON=(--lr 3e-3 --max-grad-norm 1 --seed 3)
EVAL=(--eval-data "$W/ev.bin" --eval-every 3 --eval-batches 2)

run 1 "$W/tp1" --data "$W/train.bin" --steps 6 "${COMMON[@]}" >"$W/plain.log" || fail "tp1"
run 1 "$W/tp1" --data "$W/train.bin" --steps 6 "${COMMON[@]}" "${EVAL[@]}" >"$W/eval.log" \
  || fail "tp1 with eval"
diff <(steps "$W/plain.log") <(steps "$W/eval.log") || fail "evaluating changed training"
[ "$(evals "$W/eval.log" | wc -l)" = 2 ] || fail "expected evaluations at steps 3 and 6"
echo "ok: training with evaluations is bit-identical to training without"

# The eval batch 1 as step 4's batch: rows start at (3 x 4 + r) x 16.
run 1 "$W/tp1" --data "$W/train.bin" --steps 3 "${COMMON[@]}" --save "$W/ck3.safetensors" \
  >/dev/null || fail "save at 3"
run 1 "$W/tp1" --data "$W/train.bin" --steps 3 "${COMMON[@]}" --eval-data "$W/ev.bin" \
  --eval-batches 1 >"$W/eval1.log" || fail "one eval batch"
{ head -c 192 "$TEXT"; cat "$W/ev.txt"; } >"$W/shifted.txt"
"$BIN/shard-tokens" --windows "$W/shifted.txt" -o "$W/shifted.bin" >/dev/null || fail "shard-tokens"
run 1 "$W/tp1" --data "$W/shifted.bin" --steps 4 "${COMMON[@]}" --load "$W/ck3.safetensors" \
  >"$W/step4.log" || fail "step 4 on the eval batch"
want=$(steps "$W/step4.log" | tail -1 | cut -d' ' -f2)
got=$(evals "$W/eval1.log" | cut -d' ' -f2)
awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * a) }' \
  || fail "eval loss $got is not the training step's loss $want on that batch"
echo "ok: the eval loss $got is the step's loss on the same batch ($want)"

for mesh in tp2 dp2; do
  run 2 "$W/$mesh" --data "$W/train.bin" --steps 6 "${COMMON[@]}" "${EVAL[@]}" \
    >"$W/$mesh.log" || fail "$mesh with eval"
  paste <(evals "$W/eval.log") <(evals "$W/$mesh.log") | awk '
    { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1; n++ }
    END { exit bad || n != 2 }' || fail "$mesh eval losses differ from tp1"
  echo "ok: $mesh eval losses match tp1 within 1e-5"
done
