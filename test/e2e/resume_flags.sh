#!/usr/bin/env bash
# A resume with other flags (issue 39, item 3), on the tiny Qwen2 config:
#   1. a checkpoint records its lr schedule: a resume that leaves the
#      schedule flags out (even --lr) continues it, says so in one line, and
#      every step's lr is the uninterrupted run's; --lr given alone (the
#      schedule forgotten) continues the cosine, not a constant --lr;
#   2. a schedule flag given with another value is refused before step 1
#      naming the flag, the recorded and the given value, unless
#      --override-lr-schedule (then the flags given rule, and it says so);
#   3. a program compiled for another global batch or seq is refused naming
#      both; another dp x tp mesh of the same batch and seq resumes;
#   4. a bf16 --export resumed says its master weights are rounded from bf16
#      and that its optimizer state was found; an f32 checkpoint says nothing.
# usage: resume_flags.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=2 SEQ=16
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W/ck" || fail "cannot create $W"
TOK="$W/tokens.tok"
"$BIN/shard-tokens" --windows "$TEXT" -o "$TOK" >/dev/null || fail "shard-tokens"
Q="$CONFIGS/tiny-qwen2.json"
compile q "$Q" qwen2 --tp-size=1 || fail "compile"
compile q_dp2 "$Q" qwen2 --tp-size=1 --dp-size=2 || fail "compile dp2"
BATCH=4 compile q_b4 "$Q" qwen2 --tp-size=1 || fail "compile batch 4"
SEQ=32 compile q_s32 "$Q" qwen2 --tp-size=1 || fail "compile seq 32"
BASE=(--data "$TOK" --max-grad-norm 1 --threads 1)
SCHED=(--lr 1e-2 --lr-schedule cosine --warmup-steps 2 --min-lr 1e-3)
lrs() { awk '/^step /{split($2, k, "/"); print k[1], $5, $11}' "$1"; }

# 1. the recorded schedule continues.
run 1 "$W/q" "${BASE[@]}" "${SCHED[@]}" --steps 8 >"$W/straight.log" 2>&1 \
  || { cat "$W/straight.log"; fail "straight run"; }
run 1 "$W/q" "${BASE[@]}" "${SCHED[@]}" --steps 4 --lr-decay-steps 8 \
  --save "$W/ck/model.safetensors" >"$W/first.log" 2>&1 || { cat "$W/first.log"; fail "4 steps"; }
cp "$W"/ck/model.safetensors* "$W/" || fail "copy"
CK="$W/model.safetensors"
run 1 "$W/q" "${BASE[@]}" --steps 8 --load "$CK" >"$W/bare.log" 2>&1 \
  || { cat "$W/bare.log"; fail "a resume without schedule flags (nor --lr) ran not"; }
grep -qF "train: lr schedule continued from '$CK': cosine lr=0.01 warmup=2 min_lr=0.001 decay_steps=8 (--lr-schedule, --lr, --warmup-steps, --min-lr, --lr-decay-steps not given: the recorded values)" \
  "$W/bare.log" || { cat "$W/bare.log"; fail "the resume does not say it took the recorded schedule"; }
diff <(lrs "$W/straight.log" | tail -4) <(lrs "$W/bare.log") || fail "resumed steps differ"
run 1 "$W/q" "${BASE[@]}" --lr 1e-2 --steps 8 --load "$CK" >"$W/forgot.log" 2>&1 \
  || { cat "$W/forgot.log"; fail "a resume with --lr only"; }
diff <(lrs "$W/straight.log" | tail -4) <(lrs "$W/forgot.log") \
  || fail "--lr given, schedule forgotten: not the recorded cosine"
echo "ok: flags left out take the recorded schedule: $(lrs "$W/forgot.log" | head -1)"

# 2. another value: refused, or overridden.
expect_error kind "'$CK' was trained with --lr-schedule cosine" "this run gives --lr-schedule linear" \
  -- run 1 "$W/q" "${BASE[@]}" --lr-schedule linear --steps 8 --load "$CK"
expect_error lr "was trained with --lr 0.01" "this run gives --lr 0.02" "--override-lr-schedule" \
  -- run 1 "$W/q" "${BASE[@]}" --lr 2e-2 --steps 8 --load "$CK"
expect_error decay "was trained with --lr-decay-steps 8" "this run gives --lr-decay-steps 10" \
  -- run 1 "$W/q" "${BASE[@]}" "${SCHED[@]}" --lr-decay-steps 10 --steps 10 --load "$CK"
expect_error warmup "was trained with --warmup-steps 2" "this run gives --warmup-steps 0" \
  -- run 1 "$W/q" "${BASE[@]}" --warmup-steps 0 --steps 8 --load "$CK"
grep -q "^step " "$W/err.log" && fail "a refused resume ran a step"
run 1 "$W/q" "${BASE[@]}" --lr 5e-3 --override-lr-schedule --steps 5 --load "$CK" >"$W/over.log" 2>&1 \
  || { cat "$W/over.log"; fail "--override-lr-schedule"; }
grep -qF "train: --override-lr-schedule: '$CK' recorded 'cosine lr=0.01 warmup=2 min_lr=0.001 decay_steps=8', this run follows 'constant lr=0.005 warmup=0'" \
  "$W/over.log" || { cat "$W/over.log"; fail "the override does not say what it replaced"; }
grep -q "^step 5/5 .* | lr 0.005 |" "$W/over.log" || fail "the override's lr is not --lr"
expect_error override-alone "--override-lr-schedule needs --load" \
  -- run 1 "$W/q" "${BASE[@]}" --lr 1e-2 --override-lr-schedule --steps 2
echo "ok: other schedule values refused, --override-lr-schedule takes them"

# 3. another batch or seq; another mesh.
expect_error batch "was saved by a program of global batch 2 x seq 16, this one is compiled for batch 4 x seq 16" \
  -- run 1 "$W/q_b4" "${BASE[@]}" --steps 8 --load "$CK"
expect_error seq "was saved by a program of global batch 2 x seq 16, this one is compiled for batch 2 x seq 32" \
  -- run 1 "$W/q_s32" "${BASE[@]}" --steps 8 --load "$CK"
run 2 "$W/q_dp2" "${BASE[@]}" --steps 6 --load "$CK" >"$W/dp2.log" 2>&1 \
  || { cat "$W/dp2.log"; fail "resume on dp2 (same batch and seq)"; }
max_rel <(grep '^step ' "$W/dp2.log") <(grep '^step [56]/' "$W/straight.log" | sed 's|/8 |/6 |') \
  | awk '{ exit !($1 == 2 && $2 < 1e-5 && $3 < 1e-4) }' || fail "dp2 resume differs from tp1"
echo "ok: another batch or seq refused, another mesh resumes"

# 4. a bf16 export resumed.
run 1 "$W/q" "${BASE[@]}" --lr 1e-2 --steps 2 --export "$W/bf16" --export-dtype bf16 \
  >"$W/export.log" 2>&1 || { cat "$W/export.log"; fail "bf16 export"; }
run 1 "$W/q" "${BASE[@]}" --steps 3 --load "$W/bf16" >"$W/bf16.log" 2>&1 \
  || { cat "$W/bf16.log"; fail "resume from the bf16 export"; }
grep -qF "train: note: the fp32 master weights are rounded from the BF16 tensors of '$W/bf16'; its optimizer state was found (AdamW moments and step)" \
  "$W/bf16.log" || { cat "$W/bf16.log"; fail "the bf16 resume does not say its weights are rounded"; }
grep -q "rounded" "$W/bare.log" && fail "an f32 checkpoint said its weights were rounded"
echo "ok: a bf16 export's resume says its master weights are rounded"
echo PASS
