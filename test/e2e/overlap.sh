#!/usr/bin/env bash
# Overlapped collectives (issue 16, item 2): a step compiled with the
# default overlap-collectives (parameter gathers started a layer ahead,
# gradient reductions completed under the backward; non-blocking MPI) trains
# bit-identically to the same step with --no-overlap (every collective
# blocking where it stands): every step's loss and grad norm as printed and
# every parameter after the steps (st_compare --rtol 0), and an evaluation
# (the forward-only branch, which leaves no collective in flight) gives the
# same loss. Meshes: FSDP dp2, dp2 x tp2 + SP (with and without activation
# checkpointing), dp2 x tp2 with --dp-replicate (DDP all-reduces), and dp2
# with 2 micro-batches; for Qwen2, Gemma3 (tied embedding: two gradient
# shards summed) and NemotronH (Mamba2 mixers).
#
# usage: overlap.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
status=0
# arch, mesh name, ranks, shard-compile flags
CASES=(
  "qwen2      dp2        2 --tp-size=1 --dp-size=2"
  "qwen2      dp2tp2sp   4 --tp-size=2 --dp-size=2 --sequence-parallel"
  "qwen2      dp2tp2spac 4 --tp-size=2 --dp-size=2 --sequence-parallel --activation-checkpointing"
  "qwen2      dp2tp2r    4 --tp-size=2 --dp-size=2 --dp-replicate"
  "qwen2      dp2mb      2 --tp-size=1 --dp-size=2 --micro-batch 1"
  "gemma3     dp2tp2     4 --tp-size=2 --dp-size=2"
  "nemotron_h dp2tp2sp   4 --tp-size=2 --dp-size=2 --sequence-parallel"
)
for c in "${CASES[@]}"; do
  read -r arch mesh np flags <<<"$c"
  for mode in on off; do
    extra=()
    [ "$mode" = off ] && extra=(--no-overlap)
    name=$arch-$mesh-$mode
    # shellcheck disable=SC2086 # flags are words
    compile "$name" "$CONFIGS/tiny-$arch.json" "$arch" $flags "${extra[@]}" || { status=1; continue 2; }
    run "$np" "$W/$name" --data "$W/tokens.tok" --steps 3 --lr 1e-2 --max-grad-norm 1 \
      --seed 5 --eval-data "$W/tokens.tok" --eval-every 3 --save "$W/$name.safetensors" \
      >"$W/$name.log" 2>&1 || { cat "$W/$name.log"; echo "FAIL: $name: the run failed"; status=1; continue 2; }
    [ "$(steps "$W/$name.log" | wc -l)" = 3 ] || { echo "FAIL: $name: not 3 steps"; status=1; }
  done
  on=$W/$arch-$mesh-on off=$W/$arch-$mesh-off
  if diff <(steps "$on.log") <(steps "$off.log") >/dev/null &&
     diff <(grep -i '^eval' "$on.log") <(grep -i '^eval' "$off.log") >/dev/null &&
     [ -n "$(grep -i '^eval' "$on.log")" ] &&
     "$BIN/st_compare" --rtol 0 "$on.safetensors" "$off.safetensors" >"$on.cmp"; then
    echo "OVERLAP $arch $mesh: losses, norms, eval loss and parameters bit-identical ok"
  else
    diff <(steps "$on.log") <(steps "$off.log"); diff <(grep -i '^eval' "$on.log") <(grep -i '^eval' "$off.log")
    cat "$on.cmp" 2>/dev/null
    echo "FAIL: $arch $mesh: overlapped differs from --no-overlap"
    status=1
  fi
done
[ "$status" = 0 ] && echo PASS
exit "$status"
