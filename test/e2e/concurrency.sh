#!/usr/bin/env bash
# Two jobs writing the same outputs at once (issue 39, item 2) and a
# checkpoint as one run's unit (item 3), on the tiny Qwen2 config (tp1):
#   1. two trains started together with one --save: one is refused at start
#      naming the holder (the pid and host of its lock file), the other's
#      checkpoint resumes bit-identically; the same with one --export;
#      each winner is held at its --metrics FIFO (opened after the lock is
#      taken) until the loser has been refused, so the two always overlap;
#   2. two shard-compile -o of one path at once both succeed, the result is
#      one whole program that trains a step, and no temporary is left;
#   3. another run's optimizer file at the same step, copied under the name
#      a checkpoint gives, is refused on --load naming both run ids;
#   4. --keep-last removes only its own run's step files of a shared stem;
#   5. two forks of one run (one run id, same step): one fork's optimizer
#      file copied beside the other's weights, and the same with their
#      exports, is refused on --load naming both save ids.
# usage: concurrency.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
TRAIN=(--lr 1e-2 --max-grad-norm 1.0 --seed 5)
TOK="$W/tokens.tok"
"$BIN/shard-tokens" --windows "$TEXT" -o "$TOK" >/dev/null || fail "shard-tokens"
Q="$CONFIGS/tiny-qwen2.json" L="$CONFIGS/tiny-llama.json"
compile q "$Q" qwen2 --tp-size=1 || fail "compile"
run 1 "$W/q" --data "$TOK" --steps 6 "${TRAIN[@]}" >"$W/straight.log" 2>&1 \
  || { cat "$W/straight.log"; fail "straight run"; }

# race FLAG PATH: two trains of 4 steps writing FLAG PATH at once; sets
# winner (a or b). The loser must be refused naming the holder.
race() {
  local flag=$1 path=$2 j loser= t
  winner=
  for j in a b; do
    rm -f "$W/$j.fifo" && mkfifo "$W/$j.fifo" || fail "mkfifo"
    run 1 "$W/q" --data "$TOK" --steps 4 "${TRAIN[@]}" "$flag" "$path" --metrics "$W/$j.fifo" \
      >"$W/$j.log" 2>&1 &
    eval "pid_$j=$!"
  done
  for t in $(seq 600); do
    for j in a b; do
      grep -q "belongs to another job" "$W/$j.log" 2>/dev/null && loser=$j
    done
    [ -n "$loser" ] && break
    sleep 0.1
  done
  if [ -z "$loser" ]; then # both went on: let them finish, then fail
    cat "$W/a.fifo" >/dev/null 2>&1 </dev/null & cat "$W/b.fifo" >/dev/null 2>&1 </dev/null &
    wait "$pid_a" "$pid_b"
    cat "$W/a.log" "$W/b.log"
    fail "$flag: two jobs at once, neither was refused"
  fi
  winner=$([ "$loser" = a ] && echo b || echo a)
  # lets the winner go on; no descriptor of the test's output kept, and
  # ended whatever happens (a reader left blocked kept ctest waiting)
  cat "$W/$winner.fifo" >/dev/null 2>&1 </dev/null &
  local reader=$!
  eval "wait \$pid_$loser" && fail "$flag: the refused job exited 0"
  eval "wait \$pid_$winner" || { cat "$W/$winner.log"; fail "$flag: the job holding the lock failed"; }
  kill "$reader" 2>/dev/null; wait "$reader" 2>/dev/null
  local holder
  holder=$(grep -o 'pid [0-9]* on host [^ ;)]*' "$W/$loser.log") || { cat "$W/$loser.log"; fail "$flag: the refusal names no holder"; }
  grep -qF -- "$holder" "$path.lock" || fail "$flag: the refusal names '$holder', the lock file says $(cat "$path.lock")"
  grep -q "^step 1/" "$W/$loser.log" && fail "$flag: the refused job trained"
  echo "ok: $flag: two jobs at once: one refused at start: $(grep -m1 'belongs' "$W/$loser.log")"
}

# 1. --save, then --export.
mkdir -p "$W/ck"
race --save "$W/ck/model.safetensors"
grep -q "saved '$W/ck/model.safetensors' at step 4" "$W/$winner.log" || fail "--save: the winner did not save"
run 1 "$W/q" --data "$TOK" --steps 6 "${TRAIN[@]}" --load "$W/ck/model.safetensors" \
  >"$W/resumed.log" 2>&1 || { cat "$W/resumed.log"; fail "--save: resume"; }
diff <(steps "$W/straight.log" | tail -2) <(steps "$W/resumed.log") \
  || fail "--save: the winner's checkpoint does not resume bit-identically"
echo "ok: --save: the winner's checkpoint resumes bit-identically"
race --export "$W/hf"
grep -q "exported '$W/hf' at step 4" "$W/$winner.log" && [ -f "$W/hf/model.safetensors" ] \
  || fail "--export: the winner did not export"
run 1 "$W/q" --data "$TOK" --steps 6 "${TRAIN[@]}" --load "$W/hf" >"$W/resumed_hf.log" 2>&1 \
  || { cat "$W/resumed_hf.log"; fail "--export: resume"; }
diff <(steps "$W/straight.log" | tail -2) <(steps "$W/resumed_hf.log") \
  || fail "--export: the winner's export does not resume bit-identically"
echo "ok: --export: the winner's export resumes bit-identically"

# 2. two compiles of one path at once (two models): both succeed, one
# whole program is left, and nothing else.
mkdir -p "$W/prog"
"$BIN/shard-compile" "$Q" --tp-plan=qwen2 --batch $BATCH --seq $SEQ -o "$W/prog/train" >"$W/c1.log" 2>&1 &
c1=$!
"$BIN/shard-compile" "$L" --tp-plan=llama --batch $BATCH --seq $SEQ -o "$W/prog/train" >"$W/c2.log" 2>&1 &
c2=$!
wait $c1 || { cat "$W/c1.log"; fail "compile 1 of 2 at once"; }
wait $c2 || { cat "$W/c2.log"; fail "compile 2 of 2 at once"; }
[ "$(ls "$W/prog")" = train ] || fail "compiles at once left: $(ls "$W/prog")"
[ -x "$W/prog/train" ] || fail "the program is not executable"
run 1 "$W/prog/train" --data "$TOK" --steps 1 "${TRAIN[@]}" >"$W/prog.log" 2>&1 \
  || { cat "$W/prog.log"; fail "the program two compiles left does not train"; }
echo "ok: two shard-compile -o at once: $(grep -o 'model [^,]*' "$W/prog.log" | head -1) trains a step, no temporary left"

# 3. another run's optimizer file beside a checkpoint, at the same step.
mkdir -p "$W/r1" "$W/r2"
for r in 1 2; do
  run 1 "$W/q" --data "$TOK" --steps 3 --lr 1e-2 --max-grad-norm 1.0 --seed $((r + 10)) --save "$W/r$r/model.safetensors" \
    >"$W/r$r.log" 2>&1 || { cat "$W/r$r.log"; fail "run $r"; }
done
id1=$(grep -ao 'shardrt.run":"[0-9a-f]*' "$W/r1/model.safetensors" | cut -d'"' -f3)
id2=$(grep -ao 'shardrt.run":"[0-9a-f]*' "$W/r2/model.safetensors.optim-00000003-0" | cut -d'"' -f3)
[ ${#id1} = 32 ] && [ ${#id2} = 32 ] && [ "$id1" != "$id2" ] || fail "run ids: '$id1' '$id2'"
cp "$W/r2/model.safetensors.optim-00000003-0" "$W/r1/model.safetensors.optim-00000003-0" || fail "copy"
expect_error "another run's optimizer file" "$id1" "$id2" "not one checkpoint" -- \
  run 1 "$W/q" --data "$TOK" --steps 4 --lr 1e-2 --max-grad-norm 1.0 --load "$W/r1/model.safetensors"

# 4. --keep-last with two runs on one stem: X saves steps 2 and 4, Y (a new
# run) steps 3 and 6 keeping 1: Y removes its step 3 only.
mkdir -p "$W/rot"
run 1 "$W/q" --data "$TOK" --steps 4 "${TRAIN[@]}" --save-every 2 --keep-last 2 \
  --save "$W/rot/r.safetensors" >"$W/x.log" 2>&1 || { cat "$W/x.log"; fail "rotation run X"; }
run 1 "$W/q" --data "$TOK" --steps 6 --lr 1e-2 --max-grad-norm 1.0 --seed 9 --save-every 3 --keep-last 1 \
  --save "$W/rot/r.safetensors" >"$W/y.log" 2>&1 || { cat "$W/y.log"; fail "rotation run Y"; }
kept=$(cd "$W/rot" && ls | grep -v -e optim -e '\.lock$' | tr '\n' ' ')
[ "$kept" = "r-step00000002.safetensors r-step00000004.safetensors r-step00000006.safetensors " ] \
  || fail "rotation with two runs on one stem kept: $kept"
[ "$(grep -c 'another run saved' "$W/y.log")" = 1 ] || { cat "$W/y.log"; fail "no single note on the other run's files"; }
echo "ok: --keep-last leaves another run's files of the stem: $kept"

# 5. forks of one checkpoint share its run id and save at the same steps:
# each save and export has its own save id, and a load pairs only one
# save's weights and optimizer file.
mkdir -p "$W/fork"
F="$W/fork"
run 1 "$W/q" --data "$TOK" --steps 2 "${TRAIN[@]}" --save "$F/base.safetensors" >"$F/base.log" 2>&1 \
  || { cat "$F/base.log"; fail "fork: base run"; }
run 1 "$W/q" --data "$TOK" --steps 4 "${TRAIN[@]}" --load "$F/base.safetensors" \
  --save "$F/fa.safetensors" --export "$F/ea" >"$F/fa.log" 2>&1 || { cat "$F/fa.log"; fail "fork a"; }
run 1 "$W/q" --data "$TOK" --steps 4 --max-grad-norm 1.0 --seed 5 --override-lr-schedule --lr 1e-3 \
  --load "$F/base.safetensors" --save "$F/fb.safetensors" --export "$F/eb" >"$F/fb.log" 2>&1 \
  || { cat "$F/fb.log"; fail "fork b"; }
meta() { grep -ao "shardrt.$1\":\"[0-9a-f]*" "$2" | head -1 | cut -d'"' -f3; }
OA="$F/fa.safetensors.optim-00000004-0" OB="$F/fb.safetensors.optim-00000004-0"
[ "$(meta run "$F/fa.safetensors")" = "$(meta run "$F/fb.safetensors")" ] || fail "forks: run ids differ"
sa=$(meta save "$OA") sb=$(meta save "$F/fb.safetensors") ea=$(meta save "$F/ea/optimizer.safetensors")
eb=$(meta save "$F/eb/model.safetensors")
[ ${#sa} = 32 ] && [ ${#sb} = 32 ] && [ "$sa" != "$sb" ] && [ "$sa" = "$(meta save "$F/fa.safetensors")" ] \
  || fail "save ids: '$sa' '$sb'"
[ ${#ea} = 32 ] && [ "$ea" != "$eb" ] && [ "$ea" = "$(meta save "$F/ea/model.safetensors")" ] \
  || fail "export save ids: '$ea' '$eb'"
cp "$OA" "$OB" && cp "$F/ea/optimizer.safetensors" "$F/eb/optimizer.safetensors" || fail "fork: copy"
expect_error "another fork's optimizer file" "$sb" "$sa" "not written together" -- \
  run 1 "$W/q" --data "$TOK" --steps 5 "${TRAIN[@]}" --load "$F/fb.safetensors"
expect_error "another fork's export optimizer file" "$eb" "$ea" "not written together" -- \
  run 1 "$W/q" --data "$TOK" --steps 5 "${TRAIN[@]}" --load "$F/eb"
run 1 "$W/q" --data "$TOK" --steps 5 "${TRAIN[@]}" --load "$F/fa.safetensors" >"$F/fa5.log" 2>&1 \
  || { cat "$F/fa5.log"; fail "fork a no longer resumes"; }
echo "ok: forks of one run: each save and export has its own save id; a swapped optimizer file is refused"
