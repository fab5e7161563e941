#!/usr/bin/env bash
# Resuming from one checkpoint and saving to another must leave the first
# one whole: `--load A --save B` must not delete A's optimizer file, which
# A's weights still name (shardrt.optimizer), or A can never be resumed
# again (e.g. to retry from a known good point). Fails today: train_load
# records A's optimizer file as "the previous one" and train_save removes it
# after writing B (runtime/train/state.c, prev_optim).
# usage: keep_loaded.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W"/{a,b} || fail "cannot create $W"
TRAIN=(--lr 1e-2 --max-grad-norm 1.0 --seed 5)
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile q_tp1 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=1 || fail "compile"
run 1 "$W/q_tp1" --data "$W/tokens.tok" --steps 3 "${TRAIN[@]}" --save "$W/a/model.safetensors" \
  >"$W/a.log" 2>&1 || { cat "$W/a.log"; fail "3-step run"; }
before=$(cd "$W/a" && ls | tr '\n' ' ')
run 1 "$W/q_tp1" --data "$W/tokens.tok" --steps 5 "${TRAIN[@]}" --load "$W/a/model.safetensors" \
  --save "$W/b/model.safetensors" >"$W/b.log" 2>&1 || { cat "$W/b.log"; fail "resume A, save B"; }
after=$(cd "$W/a" && ls | tr '\n' ' ')
[ "$before" = "$after" ] || echo "FAIL: --load a --save b changed a/: before: $before; after: $after"
run 1 "$W/q_tp1" --data "$W/tokens.tok" --steps 5 "${TRAIN[@]}" --load "$W/a/model.safetensors" \
  >"$W/c.log" 2>&1 || { grep -m1 'train:' "$W/c.log"; fail "A cannot be resumed after resuming from it and saving to B"; }
diff <(steps "$W/b.log") <(steps "$W/c.log") || fail "the second resume from A differs from the first"
echo PASS
