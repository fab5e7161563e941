#!/usr/bin/env bash
# Activation checkpointing (issue 16): with --activation-checkpointing (each
# decoder layer recomputed in the backward) and =attention (only the
# attention modules), training is bit-identical to without: every step's
# loss and grad norm as printed (9 digits) and every parameter after the
# steps (st_compare --rtol 0), for Qwen2, Gemma3 (sliding window, softcap-free
# (1 + w) norms, the local rotary) and NemotronH (Mamba2 mixers, attention,
# MLP blocks), at tp1 and dp2 x tp2 with sequence parallelism.
#
# usage: recompute.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
status=0
for arch in qwen2 gemma3 nemotron_h; do
  for mesh in "tp1 1 --tp-size=1" "dp2tp2sp 4 --tp-size=2 --dp-size=2 --sequence-parallel"; do
    read -r mname np flags <<<"$mesh"
    for mode in none full attention; do
      ac=()
      [ "$mode" != none ] && ac=(--activation-checkpointing="$mode")
      name=$arch-$mname-$mode
      # shellcheck disable=SC2086 # flags are words
      compile "$name" "$CONFIGS/tiny-$arch.json" "$arch" $flags "${ac[@]}" || { status=1; continue; }
      run "$np" "$W/$name" --data "$W/tokens.tok" --steps 4 --lr 1e-2 --max-grad-norm 1 \
        --seed 5 --save "$W/$name.safetensors" >"$W/$name.log" 2>&1 \
        || { cat "$W/$name.log"; echo "FAIL: $name: the run failed"; status=1; continue; }
      [ "$(steps "$W/$name.log" | wc -l)" = 4 ] || { echo "FAIL: $name: not 4 steps"; status=1; }
    done
    base=$arch-$mname-none
    for mode in full attention; do
      name=$arch-$mname-$mode
      if diff <(steps "$W/$base.log") <(steps "$W/$name.log") >/dev/null &&
         "$BIN/st_compare" --rtol 0 "$W/$name.safetensors" "$W/$base.safetensors" >"$W/$name.cmp"; then
        echo "RECOMPUTE $arch $mname $mode: losses, norms and parameters bit-identical ok"
      else
        diff <(steps "$W/$base.log") <(steps "$W/$name.log"); cat "$W/$name.cmp"
        echo "FAIL: $name differs from $base"
        status=1
      fi
    done
  done
done
[ "$status" = 0 ] && echo PASS
exit "$status"
