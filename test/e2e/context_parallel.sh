#!/usr/bin/env bash
# Context parallelism across meshes and runs (issue 42), tiny Llama, batch
# 4 x seq 32 (cp4: 8 chunks of 4 tokens):
#   1. checkpoints saved at one cp size resume at another: steps 1-2 at cp2
#      (--save), 3-4 at cp1, 5-6 at cp4, 7-8 at dp2 x cp2, each --load-ing
#      the previous run's checkpoint, against 8 straight steps at tp1: every
#      step's loss and grad norm, and the final weights, within RTOL (the
#      meshes sum in other orders: ~1e-7 measured); the step count and the
#      AdamW state carry over (a lost optimizer state moves step 3 by ~lr);
#   2. --eval-data at cp2 and at dp2 x cp2 gives tp1's evaluation loss
#      (the evaluation's forward-only step, split over cp like training);
#   3. a cp2 x tp2 program launched on 2 ranks is refused naming dp, cp,
#      tp and the world size.
# usage: context_parallel.sh CONFIG BIN_DIR MPIEXEC TEXT WORK_DIR
# env:   CP_RTOL (default 1e-5)
set -u
CONFIG=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
RTOL=${CP_RTOL:-1e-5}
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
TRAIN=(--lr 1e-2 --max-grad-norm 1.0 --seed 7 --eps 1e-3)
TOK="$W/tokens.tok"
"$BIN/shard-tokens" --windows "$TEXT" -o "$TOK" >/dev/null || fail "shard-tokens"
compile tp1 "$CONFIG" llama --tp-size=1 || fail "compile tp1"
compile cp1 "$CONFIG" llama --tp-size=1 --cp-size=1 || fail "compile cp1"
compile cp2 "$CONFIG" llama --tp-size=1 --cp-size=2 || fail "compile cp2"
compile cp4 "$CONFIG" llama --tp-size=1 --cp-size=4 || fail "compile cp4"
compile dp2cp2 "$CONFIG" llama --tp-size=1 --dp-size=2 --cp-size=2 || fail "compile dp2cp2"
compile cp2tp2 "$CONFIG" llama --tp-size=2 --cp-size=2 || fail "compile cp2tp2"
status=0

# 1. The resume chain against 8 straight steps.
run 1 "$W/tp1" --data "$TOK" --steps 8 "${TRAIN[@]}" --save "$W/straight.safetensors" \
  >"$W/straight.log" 2>&1 || { cat "$W/straight.log"; fail "straight run"; }
prev=() at=0
for leg in "cp2 2" "cp1 1" "cp4 4" "dp2cp2 4"; do
  read -r name np <<<"$leg"
  at=$((at + 2))
  run "$np" "$W/$name" --data "$TOK" --steps "$at" "${TRAIN[@]}" "${prev[@]}" \
    --save "$W/$name.safetensors" >"$W/leg$at.log" 2>&1 \
    || { cat "$W/leg$at.log"; fail "$name run to step $at"; }
  [ "$at" = 2 ] || grep -q "at step $((at - 2))" "$W/leg$at.log" \
    || { cat "$W/leg$at.log"; fail "$name did not resume at step $((at - 2))"; }
  prev=(--load "$W/$name.safetensors")
done
grep -q "mesh dp=1 x cp=2 x tp=1, batch 4 x seq 32" "$W/leg2.log" \
  || { cat "$W/leg2.log"; echo "FAIL: the start line does not name the cp axis"; status=1; }
cat "$W"/leg{2,4,6,8}.log | grep '^step ' >"$W/chain.log"
[ "$(steps "$W/chain.log" | wc -l)" = 8 ] || { cat "$W/chain.log"; fail "the chain did not log 8 steps"; }
r=$(max_rel "$W/chain.log" "$W/straight.log") || r="? ? ?"
read -r _ l g <<<"$r"
verdict=ok
awk -v t="$RTOL" -v x="$l $g" 'BEGIN { n = split(x, v, " ")
    for (i = 1; i <= n; i++) if (v[i] !~ /^[0-9.e+-]+$/ || v[i] + 0 > t + 0) exit 1 }' \
  || { verdict=FAIL; paste "$W/chain.log" "$W/straight.log"; }
"$BIN/st_compare" --rtol "$RTOL" "$W/dp2cp2.safetensors" "$W/straight.safetensors" \
  >"$W/chain.cmp" 2>&1 || { verdict=FAIL; cat "$W/chain.cmp"; }
echo "CP resume cp2 -> cp1 -> cp4 -> dp2 x cp2 vs 8 straight tp1 steps: loss $l grad_norm $g" \
  "params $(awk '/^max_rel /{print $2}' "$W/chain.cmp") rtol $RTOL $verdict"
[ "$verdict" = ok ] || status=1

# 2. Evaluation under cp.
for v in "tp1 1" "cp2 2" "dp2cp2 4"; do
  read -r name np <<<"$v"
  run "$np" "$W/$name" --data "$TOK" --eval-data "$TOK" --eval-batches 2 --steps 1 \
    "${TRAIN[@]}" >"$W/eval.$name.log" 2>&1 || { cat "$W/eval.$name.log"; fail "$name eval"; }
done
e_ref=$(awk '/^eval step/{print $5}' "$W/eval.tp1.log")
for name in cp2 dp2cp2; do
  e=$(awk '/^eval step/{print $5}' "$W/eval.$name.log")
  if awk -v a="$e" -v b="$e_ref" -v t="$RTOL" 'BEGIN { d = a - b; if (d < 0) d = -d
        exit !(a != "" && b != "" && d <= t * b) }'; then
    echo "CP eval $name loss $e vs tp1 $e_ref ok"
  else
    cat "$W/eval.$name.log"; echo "FAIL: eval $name loss '$e' vs tp1 '$e_ref'"; status=1
  fi
done

# 3. Refusals.
expect_refused() { # LABEL NEEDLE CMD...
  local label=$1 needle=$2; shift 2
  if "$@" >"$W/refused.log" 2>&1; then cat "$W/refused.log"; echo "FAIL: $label ran"; status=1
  elif grep -qF -- "$needle" "$W/refused.log"; then echo "CP refused $label ok"
  else cat "$W/refused.log"; echo "FAIL: $label: no '$needle'"; status=1; fi
}
expect_refused "cp2 x tp2 on 2 ranks" "partitioned for dp=1 x cp=2 x tp=2" \
  run 2 "$W/cp2tp2" --data "$TOK" --steps 1 "${TRAIN[@]}"
grep -q "world size 2" "$W/refused.log" || { cat "$W/refused.log"; echo "FAIL: the world size is not named"; status=1; }

[ "$status" = 0 ] && echo PASS || echo "FAIL: context parallelism (logs in $W)"
exit "$status"
