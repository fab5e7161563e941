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

# i64s V...: the values as little-endian I64 bytes.
i64s() { for v in "$@"; do le64 "$v"; done; }
# tensor_bytes FILE NAME: the data of tensor NAME of safetensors FILE.
tensor_bytes() {
  local n h a b
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  h=$(head -c $((8 + n)) "$1" | tail -c "$n")
  read -r a b < <(printf '%s' "$h" |
    sed -n "s/.*\"$2\":{[^}]*\"data_offsets\":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p")
  tail -c +$((9 + n + a)) "$1" | head -c $((b - a))
}
# st FILE NAME:DTYPE:ROWS:COLS:DATA...: a safetensors file of those [ROWS,
# COLS] tensors, DATA a file of their bytes.
st() {
  local f=$1 hdr="{" off=0 sep="" spec name dt r c d n; shift
  for spec in "$@"; do
    IFS=: read -r name dt r c d <<<"$spec"
    n=$(stat -c %s "$d")
    hdr+="$sep\"$name\":{\"dtype\":\"$dt\",\"shape\":[$r,$c],\"data_offsets\":[$off,$((off + n))]}"
    off=$((off + n)) sep=,
  done
  hdr+="}"
  { le64 "${#hdr}"; printf '%s' "$hdr"; for spec in "$@"; do cat "${spec##*:}"; done; } >"$f"
}
# rows_of V...: the values repeated for each of the $BATCH rows.
rows_of() { local r; for ((r = 0; r < BATCH; r++)); do i64s "$@"; done; }

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
expect_error not-a-batch "expected.safetensors" "tensor 'grad_norm' is not one the driver reads" -- \
  run 1 "$W/keep" --batch-file "$G/expected.safetensors" "${STEP[@]}"
expect_error bad-label "bad-label.safetensors" "labels[0][3] = 200 is outside [0, 128) and is not -100" -- \
  run 1 "$W/keep" --batch-file "$W/bad-label.safetensors" "${STEP[@]}"
expect_error bad-id "input_ids[1][2] = 128 is outside [0, 128)" -- \
  run 1 "$W/keep" --batch-file "$W/bad-id.safetensors" "${STEP[@]}"
expect_error bad-shape "'input_ids' must be I64 [$BATCH, $SEQ]" "[1, 1]" -- \
  run 1 "$W/keep" --batch-file "$W/bad-shape.safetensors" "${STEP[@]}"
# Hugging Face batch files: the golden batch with position_ids and
# attention_mask added, and variants of it (documents.c: transformers'
# reading of them).
tensor_bytes "$G/batch.safetensors" input_ids >"$W/ids.bin"
tensor_bytes "$G/batch.safetensors" labels >"$W/labels.bin"
IDS="input_ids:I64:$BATCH:$SEQ:$W/ids.bin" LABELS="labels:I64:$BATCH:$SEQ:$W/labels.bin"
mapfile -t AR < <(seq 0 $((SEQ - 1)))
rows_of "${AR[@]}" >"$W/arange.bin"
for ((i = 0; i < BATCH * SEQ; i++)); do printf '\x01'; done >"$W/ones.bin"
# position_ids 0..S-1 and an all-ones BOOL mask: one document per row,
# exactly the golden step (the dump matches transformers' expected values).
st "$W/hf.safetensors" "$IDS" "$LABELS" "position_ids:I64:$BATCH:$SEQ:$W/arange.bin" \
  "attention_mask:BOOL:$BATCH:$SEQ:$W/ones.bin"
run 1 "$W/keep" --batch-file "$W/hf.safetensors" "${STEP[@]}" --dump "$W/hf.dump.safetensors" \
  >"$W/hf.log" 2>&1 || { cat "$W/hf.log"; fail "the batch with position_ids and attention_mask"; }
"$BIN/golden_compare" "$W/hf.dump.safetensors" "$G/expected.safetensors" >"$W/hf.cmp" 2>&1 \
  || { cat "$W/hf.cmp"; fail "position_ids 0..S-1 and an all-ones mask changed the step"; }
run 1 "$W/keep" --batch-file "$G/batch.safetensors" "${STEP[@]}" --dump "$W/base.dump.safetensors" \
  >"$W/base.log" 2>&1 || { cat "$W/base.log"; fail "the golden batch"; }
# ... and bit for bit the step without them.
"$BIN/golden_compare" "$W/hf.dump.safetensors" "$W/base.dump.safetensors" >"$W/hf-base.cmp" 2>&1
grep -qx 'max_rel loss 0.00e+00 logits 0.00e+00 checksum 0.00e+00 grad_norm 0.00e+00 grad_norms 0.00e+00 params 0.00e+00' \
  "$W/hf-base.cmp" || { cat "$W/hf-base.cmp"; fail "position_ids 0..S-1 and an all-ones mask: not bit-identical"; }
echo "ok: position_ids 0..S-1 and an all-ones mask give transformers' step ($(grep '^max_rel ' "$W/hf.cmp")), bit-identical to the batch without them"
st "$W/labels-only.safetensors" "$LABELS"
expect_error no-input-ids "labels-only.safetensors" "input_ids" -- \
  run 1 "$W/keep" --batch-file "$W/labels-only.safetensors" "${STEP[@]}"
i64s 1 2 3 >"$W/three.bin"
st "$W/extra.safetensors" "$IDS" "$LABELS" "token_type_ids:I64:1:3:$W/three.bin"
expect_error unknown-tensor "extra.safetensors" "tensor 'token_type_ids' is not one the driver reads" -- \
  run 1 "$W/keep" --batch-file "$W/extra.safetensors" "${STEP[@]}"
head -c $((BATCH * SEQ * 4)) /dev/zero >"$W/i32.bin"
st "$W/pos-i32.safetensors" "$IDS" "$LABELS" "position_ids:I32:$BATCH:$SEQ:$W/i32.bin"
expect_error position-dtype "'position_ids' must be I64 [$BATCH, $SEQ]" "got I32" -- \
  run 1 "$W/keep" --batch-file "$W/pos-i32.safetensors" "${STEP[@]}"
{ i64s "${AR[@]}"; i64s 0 1 2 3 4 -3 "${AR[@]:6}"; } >"$W/neg.bin"
st "$W/pos-neg.safetensors" "$IDS" "$LABELS" "position_ids:I64:$BATCH:$SEQ:$W/neg.bin"
expect_error position-negative "pos-neg.safetensors" "position_ids[1][5] = -3 is negative" -- \
  run 1 "$W/keep" --batch-file "$W/pos-neg.safetensors" "${STEP[@]}"
mapfile -t BIG < <(seq $((512 - SEQ + 1)) 512) # qwen2: 512 positions
rows_of "${BIG[@]}" >"$W/big.bin"
st "$W/pos-big.safetensors" "$IDS" "$LABELS" "position_ids:I64:$BATCH:$SEQ:$W/big.bin"
expect_error position-too-large "position_ids[0][$((SEQ - 1))] = 512" "max_position_embeddings 512" -- \
  run 1 "$W/keep" --batch-file "$W/pos-big.safetensors" "${STEP[@]}"
{ i64s 1 1 1 1 1 1 1 2; rows_of "${AR[@]}" | tail -c +65; } >"$W/mask2.bin"
st "$W/mask2.safetensors" "$IDS" "$LABELS" "attention_mask:I64:$BATCH:$SEQ:$W/mask2.bin"
expect_error mask-not-binary "attention_mask[0][7] = 2 is neither 0 (padding) nor 1" -- \
  run 1 "$W/keep" --batch-file "$W/mask2.safetensors" "${STEP[@]}"
# A left-padded row whose first real token is scored: the logits that
# predict it are a padding query's.
{ for ((i = 0; i < 4; i++)); do printf '\x00'; done; tail -c +5 "$W/ones.bin"; } >"$W/leftpad.bin"
{ i64s -100 -100 -100 -100; tail -c +33 "$W/ids.bin"; } >"$W/leftpad-labels.bin"
st "$W/leftpad.safetensors" "$IDS" "labels:I64:$BATCH:$SEQ:$W/leftpad-labels.bin" \
  "attention_mask:BOOL:$BATCH:$SEQ:$W/leftpad.bin"
expect_error label-after-padding "labels[0][4] = " "token 3, padding (attention_mask 0)" -- \
  run 1 "$W/keep" --batch-file "$W/leftpad.safetensors" "${STEP[@]}"
# A mask with a hole (1 0 1): transformers keeps both sides one document,
# which runs of segment ids cannot say: refused, naming the row and columns.
{ head -c 4 "$W/ones.bin"; printf '\x00'; tail -c +6 "$W/ones.bin"; } >"$W/hole.bin"
st "$W/hole.safetensors" "$IDS" "$LABELS" "attention_mask:BOOL:$BATCH:$SEQ:$W/hole.bin"
expect_error mask-hole "attention_mask row 0 has padding at column 4 between tokens" -- \
  run 1 "$W/keep" --batch-file "$W/hole.safetensors" "${STEP[@]}"
# The step's own segment_ids: a document id that comes back after another
# one (0 then 1 then 0) is refused (the cpu kernels read runs, the cuda ones
# compare ids: they would differ).
mapfile -t BACK < <(for ((i = 0; i < SEQ; i++)); do echo $(( i >= 8 && i < 16 )); done)
rows_of "${BACK[@]}" >"$W/back.bin"
st "$W/back.safetensors" "$IDS" "$LABELS" "segment_ids:I64:$BATCH:$SEQ:$W/back.bin"
expect_error segment-comes-back "segment_ids[0][16] = 0" "larger id than every earlier one" -- \
  run 1 "$W/keep" --batch-file "$W/back.safetensors" "${STEP[@]}"
# A batch whose labels are all -100 scores nothing: its loss is reported as
# such, on the console and in --metrics, not as 0.
mapfile -t IGNORED < <(for ((i = 0; i < SEQ; i++)); do echo -100; done)
rows_of "${IGNORED[@]}" >"$W/ignored.bin"
st "$W/no-labels.safetensors" "$IDS" "labels:I64:$BATCH:$SEQ:$W/ignored.bin"
rm -f "$W/no-labels.jsonl"
run 1 "$W/keep" --batch-file "$W/no-labels.safetensors" "${STEP[@]}" --metrics "$W/no-labels.jsonl" \
  >"$W/no-labels.log" 2>&1 || { cat "$W/no-labels.log"; fail "the batch without labels"; }
grep -q '^step 1/1 | loss - | norm 0 | .* | NO LABELS (every label is -100: nothing scored)$' "$W/no-labels.log" \
  || { cat "$W/no-labels.log"; fail "a step without labels is not reported as such"; }
grep -q '"loss": null, .*"no_labels": true' "$W/no-labels.jsonl" \
  || { cat "$W/no-labels.jsonl"; fail "the --metrics record of a step without labels"; }
grep -q 'NO LABELS' "$W/hf.log" "$W/base.log" && fail "NO LABELS on a scored step"
echo "ok: a step without labels: $(grep '^step ' "$W/no-labels.log")"

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
