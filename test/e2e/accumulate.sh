#!/usr/bin/env bash
# Gradient accumulation (issue 16): a step of 4 micro-batches of 2 sequences
# (shard-compile --micro-batch 2 --batch 8) is the batch-8 step: every
# step's loss and grad norm within 1e-6 relative, and the parameters after
# 5 steps within 1e-5 of the tensor's scale, parity.sh's tolerance (AdamW
# eps 1e-3, as parity.sh explains; k_proj.bias, whose true gradient is 0,
# moves by 1.4e-6 of its 7e-4 scale at dp2 x tp2), at tp1 and at dp2 x tp2
# (2 micro-batches per rank); the loss
# is token-weighted over the whole batch, so a batch file whose micro-batches
# score different numbers of labels (-100s) gives the batch-2 step's loss
# from 2 micro-batches of 1. Refused: a micro-batch that does not divide the
# rows per rank, --keep-logits with micro-batches, the cuda backend.
#
# usage: accumulate.sh CONFIG_DIR GOLDEN_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 GOLDEN=$2 BIN=$3 MPI=$4 TEXT=$5 W=$6
SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
TRAIN=(--data "$W/tokens.tok" --steps 5 --lr 1e-2 --max-grad-norm 1 --eps 1e-3 --seed 3)
BATCH=8
compile whole "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=1 || fail "compile"
run 1 "$W/whole" "${TRAIN[@]}" --save "$W/whole.st" >"$W/whole.log" 2>&1 || { cat "$W/whole.log"; fail "whole run"; }
for v in "m2 1 --tp-size=1 --micro-batch 2" "dp2tp2m2 4 --tp-size=2 --dp-size=2 --micro-batch 2"; do
  read -r name np flags <<<"$v"
  # shellcheck disable=SC2086 # flags are words
  compile "$name" "$CONFIGS/tiny-qwen2.json" qwen2 $flags || fail "compile $name"
  run "$np" "$W/$name" "${TRAIN[@]}" --save "$W/$name.st" >"$W/$name.log" 2>&1 \
    || { cat "$W/$name.log"; fail "$name run"; }
  grep -q "micro-batches of 2 x 32 per rank per step" "$W/$name.log" || fail "$name: no accumulation"
  got=$(max_rel "$W/$name.log" "$W/whole.log") || fail "$name: step lines"
  read -r n ml mg <<<"$got"
  awk -v a="$ml" -v b="$mg" -v n="$n" 'BEGIN { exit !(n == 5 && a <= 1e-6 && b <= 1e-6) }' \
    || fail "$name: loss/norm differ from the batch-8 step: $got"
  "$BIN/st_compare" --rtol 1e-5 "$W/$name.st" "$W/whole.st" >"$W/$name.cmp" \
    || { cat "$W/$name.cmp"; fail "$name: parameters differ"; }
  echo "ACCUMULATE $name: $n steps, loss $ml norm $mg, params $(tail -1 "$W/$name.cmp")"
done

# Labels of unequal count per micro-batch (the golden Llama batch: a masked
# prefix and dropped labels in one row only).
G=$GOLDEN/llama
BATCH=2
compile gwhole "$G/config.json" llama --tp-size=1 || fail "compile gwhole"
compile gm1 "$G/config.json" llama --tp-size=1 --micro-batch 1 || fail "compile gm1"
for n in gwhole gm1; do
  run 1 "$W/$n" --batch-file "$G/batch.safetensors" --load "$G/model.safetensors" --steps 1 \
    --lr 1e-2 --max-grad-norm 1 >"$W/$n.log" 2>&1 || { cat "$W/$n.log"; fail "$n run"; }
done
got=$(max_rel "$W/gm1.log" "$W/gwhole.log") || fail "batch file step lines"
read -r n ml mg <<<"$got"
awk -v a="$ml" -v b="$mg" 'BEGIN { exit !(a <= 1e-6 && b <= 1e-6) }' \
  || fail "batch file: 2 micro-batches differ from the batch-2 step: $got"
echo "ACCUMULATE batch file: loss $ml norm $mg"

BATCH=8
expect_error "micro-batch not dividing" "--micro-batch 3 does not divide the 8 sequences per rank" -- \
  "$BIN/shard-compile" "$CONFIGS/tiny-qwen2.json" --tp-plan=qwen2 --batch 8 --seq $SEQ --micro-batch 3 -o "$W/x"
expect_error "keep-logits" "--keep-logits with --micro-batch" -- \
  "$BIN/shard-compile" "$CONFIGS/tiny-qwen2.json" --tp-plan=qwen2 --batch 8 --seq $SEQ --micro-batch 2 --keep-logits -o "$W/x"
expect_error "cuda" "gradient accumulation is not available on the cuda backend" -- \
  "$BIN/shard-compile" "$CONFIGS/tiny-qwen2.json" --tp-plan=qwen2 --batch 8 --seq $SEQ --micro-batch 2 --backend=cuda --emit=obj -o "$W/x.o"
echo PASS
