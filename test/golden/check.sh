#!/usr/bin/env bash
# Golden parity with Hugging Face transformers for one architecture (issue 8).
#
# GOLDEN holds what test/golden/generate.py wrote: config.json,
# model.safetensors (the weights), batch.safetensors (input ids and labels,
# some -100), step.env (plan, batch, seq, AdamW and clipping settings) and
# expected.safetensors (what transformers computed for one step). For each
# mesh -- tp1, tp2, tp2 + sequence parallel, for a batch of documents
# dp2 and dp2 x tp2 + SP too, and the context-parallel cp2, cp4,
# cp2 x tp2 + SP and dp2 x cp2 -- this compiles the config with
# --keep-logits, runs ONE step from the golden weights on the golden batch
# with the golden hyper-parameters (--load, --batch-file), writes the
# driver's --dump and compares it with golden_compare, whose tolerances are:
#   loss, logits (and their checksum): 1e-4 relative (logits: to the tensor's
#     largest magnitude);
#   the total and every per-parameter gradient norm: 1e-3 relative;
#   every updated parameter: 1e-3 of the tensor's largest magnitude, every
#     element. That holds because the step uses AdamW eps = 1e-6, not torch's
#     default 1e-8 (lr 1e-2, weight decay 0.1): AdamW's first step moves an
#     element by lr * g / (|g| + eps) (+ decay), which is +-lr for |g| >> eps
#     but has slope lr / eps at g ~ 0. Each model has elements whose
#     gradient is ~1e-9 (some of qwen2's k_proj.bias, a v_proj element), where
#     the two implementations' fp32 rounding differences (~1e-9) become
#     update differences of ~0.04 lr with eps 1e-8 (measured: qwen2 failed at
#     3.1e-3 of the scale while everything else matched to 1e-6), but only
#     ~lr * 1e-9 / 1e-6 = 1e-5 with eps 1e-6 (measured: at most 8e-5 of the
#     scale). Elements with |g| >> 1e-6 still move by +-lr: a wrong gradient
#     sign, a missing update or a wrong decay moves an element by ~lr, about
#     3% of the scale.
# Prints one "GOLDEN arch mesh ..." line per mesh (the comparison table).
#
# usage: check.sh ARCH GOLDEN_DIR BIN_DIR MPIEXEC WORK_DIR
set -u
ARCH=$1 G=$2 BIN=$3 MPI=$4 W=$5
. "$(dirname "$0")/../e2e/lib.sh"
# WEIGHTS: what --weights and --load get, relative to GOLDEN (a model
# directory for the cases written by save_pretrained). CARRIED: prefixes of
# the tensors a --save after the step must give back byte for byte.
# DOCUMENTS: packed or leftpad for a batch of documents (issue 41; its
# batch file holds position_ids or attention_mask).
WEIGHTS=model.safetensors CARRIED=
DOCUMENTS=
# PARAM_DTYPE: bf16 for a step under torch.autocast (issue 43): compiled
# --param-dtype bf16 (no --keep-logits: its logits are bf16) and compared
# with golden_compare --bf16's tolerances.
PARAM_DTYPE=
# shellcheck disable=SC1091 # generated: PLAN BATCH SEQ LR BETAS EPS WEIGHT_DECAY MAX_GRAD_NORM [DOCUMENTS]
. "$G/step.env"
CKPT=$G/$WEIGHTS
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"

VARIANTS=(
  "tp1   1 --tp-size=1"
  "tp2   2 --tp-size=2"
  "tp2sp 2 --tp-size=2 --sequence-parallel"
)
# A batch of documents also over dp (FSDP) and dp x tp + SP: each dp rank
# holds other documents and another share of the kept labels, and the loss
# is still their mean over the whole batch, as transformers takes it.
# (--micro-batch cannot keep the logits the comparison reads.)
[ -n "$DOCUMENTS" ] && VARIANTS+=(
  "dp2      2 --tp-size=1 --dp-size=2"
  "dp2tp2sp 4 --tp-size=2 --dp-size=2 --sequence-parallel"
)
# Context parallelism: each sequence in 2 x cp chunks over the ranks, K/V
# all-gathered (NemotronH's Mamba2 mixers: the sequence gathered, the heads
# split); the loss is still transformers' mean over the whole batch's kept
# labels. (Not for the bf16 case, whose meshes are tp only.)
[ "$PARAM_DTYPE" != bf16 ] && VARIANTS+=(
  "cp2      2 --tp-size=1 --cp-size=2"
  "cp4      4 --tp-size=1 --cp-size=4"
  "cp2tp2sp 4 --tp-size=2 --cp-size=2 --sequence-parallel"
  "dp2cp2   4 --tp-size=1 --dp-size=2 --cp-size=2"
)
LOWER=(--keep-logits) COMPARE=()
[ "$PARAM_DTYPE" = bf16 ] && LOWER=(--param-dtype bf16) COMPARE=(--bf16)
status=0
for v in "${VARIANTS[@]}"; do
  read -r name np flags <<<"$v"
  # shellcheck disable=SC2086 # flags are words
  compile "$name" "$G/config.json" "$PLAN" $flags "${LOWER[@]}" --weights "$CKPT" \
    || { echo "FAIL: $ARCH $name: does not compile"; status=1; continue; }
  save=()
  [ -n "$CARRIED" ] && save=(--save "$W/$name.saved.safetensors")
  run "$np" "$W/$name" --batch-file "$G/batch.safetensors" --load "$CKPT" \
    --steps 1 --lr "$LR" --betas "$BETAS" --eps "$EPS" --weight-decay "$WEIGHT_DECAY" \
    --max-grad-norm "$MAX_GRAD_NORM" --dump "$W/$name.dump.safetensors" "${save[@]}" \
    >"$W/$name.log" 2>&1 \
    || { cat "$W/$name.log"; echo "FAIL: $ARCH $name: the step failed"; status=1; continue; }
  verdict=ok
  # transformers' file has no optimizer state: its weights, step 1 (not a resume).
  grep -q "loaded the weights of '$CKPT'; training starts at step 1" "$W/$name.log" \
    || { cat "$W/$name.log"; echo "FAIL: $ARCH $name: the Hugging Face checkpoint not loaded as weights only"; status=1; }
  "$BIN/golden_compare" "${COMPARE[@]}" "$W/$name.dump.safetensors" "$G/expected.safetensors" \
    >"$W/$name.cmp" 2>&1 || { verdict=FAIL; cat "$W/$name.cmp"; status=1; }
  if [ -n "$CARRIED" ]; then
    # shellcheck disable=SC2086 # prefixes are words
    "$BIN/carried_check" "$W/$name.saved.safetensors" "$CKPT/model.safetensors" $CARRIED \
      >"$W/$name.carried" 2>&1 || { verdict=FAIL; status=1; }
    cat "$W/$name.carried"
  fi
  grep '^step ' "$W/$name.log"
  printf 'GOLDEN %-6s %-5s %s %s\n' "$ARCH" "$name" \
    "$(grep '^max_rel ' "$W/$name.cmp" || echo 'no comparison')" "$verdict"
done
[ "$status" = 0 ] && echo PASS || echo "FAIL: $ARCH: differs from transformers (logs in $W)"
exit "$status"
