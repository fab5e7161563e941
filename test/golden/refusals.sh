#!/usr/bin/env bash
# The driver's --batch-file and --dump (test/golden's one-step runs): bad
# batch files and flag combinations are refused with a message naming the
# file, tensor, position and value; a program compiled without
# --keep-logits dumps everything but the logits.
#
# usage: refusals.sh GOLDEN_DIR BIN_DIR MPIEXEC WORK_DIR   (GOLDEN_DIR: qwen2/)
set -u
G=$1 BIN=$2 MPI=$3 W=$4
. "$(dirname "$0")/../e2e/lib.sh"
# shellcheck disable=SC1091 # generated: PLAN BATCH SEQ LR ...
. "$G/step.env"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"

# le64 N: N as 8 little-endian bytes.
le64() { local h; h=$(printf '%016x' "$1"); for i in 14 12 10 8 6 4 2 0; do printf "\\x${h:$i:2}"; done; }
# batch FILE ROWS COLS [BYTE_OFFSET HEX]: input_ids and labels, I64 [ROWS, COLS],
# all zeros except one byte of the data section set to HEX.
batch() {
  local f=$1 n=$(($2 * $3 * 8))
  local hdr="{\"input_ids\":{\"dtype\":\"I64\",\"shape\":[$2,$3],\"data_offsets\":[0,$n]},\"labels\":{\"dtype\":\"I64\",\"shape\":[$2,$3],\"data_offsets\":[$n,$((2 * n))]}}"
  { le64 "${#hdr}"; printf '%s' "$hdr"
    if [ $# -gt 3 ]; then head -c "$4" /dev/zero; printf "\\x$5"; head -c $((2 * n - $4 - 1)) /dev/zero
    else head -c $((2 * n)) /dev/zero; fi; } >"$f"
}

compile keep "$G/config.json" "$PLAN" --tp-size=1 --keep-logits || fail "shard-compile (keep-logits)"
compile plain "$G/config.json" "$PLAN" --tp-size=1 || fail "shard-compile"
STEP=(--steps 1 --lr "$LR" --betas "$BETAS" --eps "$EPS" --weight-decay "$WEIGHT_DECAY"
      --max-grad-norm "$MAX_GRAD_NORM" --load "$G/model.safetensors")

# Labels row 0, position 3 (byte 512 + 24) = 200 >= vocab 128; ids [1, 1].
batch "$W/bad-label.safetensors" "$BATCH" "$SEQ" $((BATCH * SEQ * 8 + 24)) c8
batch "$W/bad-id.safetensors" "$BATCH" "$SEQ" $((SEQ * 8 + 16)) 80
batch "$W/bad-shape.safetensors" 1 1
batch "$W/zeros.safetensors" "$BATCH" "$SEQ"
expect_error both-sources "give one source of batches" -- \
  run 1 "$W/keep" --data "$W/x.tok" --batch-file "$G/batch.safetensors" "${STEP[@]}"
expect_error no-source "--data TOKENS (or --batch-file FILE) is required" -- \
  run 1 "$W/keep" "${STEP[@]}"
expect_error no-input-ids "input_ids" "expected.safetensors" -- \
  run 1 "$W/keep" --batch-file "$G/expected.safetensors" "${STEP[@]}"
expect_error bad-label "bad-label.safetensors" "labels[0][3] = 200 is outside [0, 128) and is not -100" -- \
  run 1 "$W/keep" --batch-file "$W/bad-label.safetensors" "${STEP[@]}"
expect_error bad-id "input_ids[1][2] = 128 is outside [0, 128)" -- \
  run 1 "$W/keep" --batch-file "$W/bad-id.safetensors" "${STEP[@]}"
expect_error bad-shape "'input_ids' must be I64 [$BATCH, $SEQ]" "[1, 1]" -- \
  run 1 "$W/keep" --batch-file "$W/bad-shape.safetensors" "${STEP[@]}"
# A program without --keep-logits dumps all but the logits; a run that
# resumes at its last step has no step to dump.
run 1 "$W/plain" --batch-file "$G/batch.safetensors" "${STEP[@]}" --save "$W/ckpt.safetensors" \
  --dump "$W/plain.dump.safetensors" >"$W/plain.log" 2>&1 || { cat "$W/plain.log"; fail "plain run"; }
"$BIN/golden_compare" "$W/plain.dump.safetensors" "$G/expected.safetensors" >"$W/plain.cmp" 2>&1
grep -q '^MISSING logits:' "$W/plain.cmp" && grep -q '^MISSING logits.checksum:' "$W/plain.cmp" \
  && [ "$(grep -c -E '^(MISMATCH|MISSING|EXTRA)' "$W/plain.cmp")" = 2 ] \
  || { cat "$W/plain.cmp"; fail "the plain program's dump: expected everything but the logits"; }
echo "ok: without --keep-logits the dump has no logits and everything else matches"
expect_error dump-no-step "--dump" "no step to run (loaded at step 1, --steps 1)" -- \
  run 1 "$W/plain" --batch-file "$G/batch.safetensors" "${STEP[@]:0:12}" \
    --load "$W/ckpt.safetensors" --dump "$W/never.safetensors"
[ ! -e "$W/never.safetensors" ] || fail "dump-no-step wrote a dump"

# Hyper-parameters AdamW is not defined for, or that overflow a float, are
# refused before anything runs (an eps of 0 once saved NaN weights).
BASE=(--batch-file "$G/batch.safetensors" --steps 1 --max-grad-norm 1 --load "$G/model.safetensors")
expect_error eps-zero "--eps must be > 0, got 0" -- run 1 "$W/plain" "${BASE[@]}" --lr 0.01 --eps 0
expect_error lr-negative "--lr must be >= 0, got -1" -- run 1 "$W/plain" "${BASE[@]}" --lr -1
expect_error lr-overflow "--lr: '1e39' is not a finite float" -- run 1 "$W/plain" "${BASE[@]}" --lr 1e39
expect_error decay-negative "--weight-decay must be >= 0" -- \
  run 1 "$W/plain" "${BASE[@]}" --lr 0.01 --weight-decay -1
# --dump never replaces the run's checkpoints; --save's directory is checked
# before the first step, not after the last.
expect_error dump-onto-load "--dump '$G/model.safetensors' would overwrite the checkpoint given to --load" -- \
  run 1 "$W/plain" "${BASE[@]}" --lr 0.01 --dump "$G/model.safetensors"
expect_error save-missing-dir "directory '$W/no-such-dir' is missing or not writable" -- \
  run 1 "$W/plain" "${BASE[@]}" --lr 0.01 --save "$W/no-such-dir/x.safetensors"
# Weights that are no longer numbers are never saved over a checkpoint: a
# step with lr 3.4e38 and weight decay 1 overflows weights to infinity, and
# the save after it is refused.
cp "$W/ckpt.safetensors" "$W/keep.safetensors"
cp "$W/ckpt.safetensors" "$W/before.safetensors"
expect_error non-finite-save "has non-finite values at step 2: not saving" -- \
  run 1 "$W/plain" --batch-file "$G/batch.safetensors" --steps 2 --max-grad-norm 0 --lr 3.4e38 \
    --weight-decay 1 --override-lr-schedule --load "$W/ckpt.safetensors" --save "$W/keep.safetensors"
cmp -s "$W/keep.safetensors" "$W/before.safetensors" || fail "the refused save changed the checkpoint"
echo "ok: the refused save left the previous checkpoint byte-identical"
echo PASS
