#!/usr/bin/env bash
# Ranks agree (issue 39, item 4): MPMD launches (`mpirun -np 1 ./a : -np 1
# ./b`) and per-rank flags, on the tiny Qwen2 config at tp 2.
#   1. Programs compiled from configs that differ only in rope_theta, or only
#      in rms_norm_eps, are refused before step 1 naming the config key and
#      both values (they trained a hybrid and exited 0);
#   2. one binary with --lr 1e-2 on rank 0 and 2e-2 on rank 1 is refused
#      naming --lr and both values (each shard stepped at its own lr);
#   3. two different models (hidden size 64 and 96) are refused the same
#      way, with no signal (they ended in MPI_ERR_TRUNCATE and a SIGSEGV);
#   4. a rank whose flags do not parse while the other's do: refused, no hang;
#   5. the same binary and flags as an MPMD launch trains exactly as the
#      normal SPMD launch (the same step lines);
#   6. input files compare by what they hold, not how they are spelled: one
#      name under two working directories naming two token files (--data)
#      or two checkpoints (--load) is refused naming the flag (they trained
#      a mix and exited 0); one file named relative on one rank and
#      absolute on the other, with --save spelled two ways and
#      --lr-schedule constant given on one rank only, trains as SPMD.
# Each refusal must exit non-zero within its timeout and print "train: rank".
# usage: agree.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=2 SEQ=16
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
TOK="$W/tokens.tok"
"$BIN/shard-tokens" --windows "$TEXT" -o "$TOK" >/dev/null || fail "shard-tokens"
Q="$CONFIGS/tiny-qwen2.json"
sed 's/"rope_theta": 1000000.0/"rope_theta": 10000.0/' "$Q" >"$W/theta.json"
sed 's/"rms_norm_eps": 1e-06/"rms_norm_eps": 1e-05/' "$Q" >"$W/eps.json"
sed 's/"hidden_size": 64/"hidden_size": 96/' "$Q" >"$W/wide.json"
for c in theta eps wide; do cmp -s "$Q" "$W/$c.json" && fail "sed left $c.json unchanged"; done
compile a "$Q" qwen2 --tp-size=2 || fail "compile a"
compile theta "$W/theta.json" qwen2 --tp-size=2 || fail "compile theta"
compile eps "$W/eps.json" qwen2 --tp-size=2 || fail "compile eps"
compile wide "$W/wide.json" qwen2 --tp-size=2 || fail "compile wide"
ARGS=(--data "$TOK" --steps 2 --lr 1e-2 --max-grad-norm 1 --threads 1)

# mpmd NAME NEEDLE... -- RANK0-ARGS... :: RANK1-ARGS...: the two-rank MPMD
# launch must fail (not by a signal, within 60 s) and print every NEEDLE.
mpmd() {
  local name=$1; shift; local needles=() a=() b=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done; shift
  while [ "$1" != "::" ]; do a+=("$1"); shift; done; shift
  b=("$@")
  timeout 60 "$MPI" --allow-run-as-root --oversubscribe -np 1 "${a[@]}" : -np 1 "${b[@]}" \
    >"$W/$name.log" 2>&1
  local rc=$?
  [ $rc = 0 ] && { cat "$W/$name.log"; fail "$name: accepted (exit 0)"; }
  [ $rc = 124 ] && { cat "$W/$name.log"; fail "$name: still running after 60 s"; }
  grep -qE "signal|Segmentation|MPI_ERR" "$W/$name.log" && { cat "$W/$name.log"; fail "$name: crashed"; }
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$W/$name.log" || { cat "$W/$name.log"; fail "$name: no '$n' in the error"; }
  done
  grep -q "^step " "$W/$name.log" && { cat "$W/$name.log"; fail "$name: a step ran"; }
  echo "ok: $name refused: $(grep -m1 'train: rank' "$W/$name.log")"
}

# 1. configs that differ in one value.
mpmd rope_theta "config differs at 'rope_theta': 1000000.0 on rank 0, 10000.0 on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/theta" "${ARGS[@]}"
mpmd rms_norm_eps "config differs at 'rms_norm_eps': 1e-6 on rank 0, 1e-5 on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/eps" "${ARGS[@]}"
# 2. per-rank --lr (and another option after it).
B=("${ARGS[@]}"); B[5]=2e-2
mpmd lr "rank 1 disagrees with rank 0 on --lr: 0.01 on rank 0, 0.02 on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/a" "${B[@]}"
mpmd seed "disagrees with rank 0 on --seed: 0 on rank 0, 7 on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/a" "${ARGS[@]}" --seed 7
# 3. two models.
mpmd models "config differs at 'hidden_size': 64 on rank 0, 96 on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/wide" "${ARGS[@]}"
# 4. flags that parse on one rank only; --help on one rank only.
mpmd parse "disagrees with rank 0 on command line" "--lr: 'x' is not a number" \
  -- "$W/a" "${ARGS[@]}" :: "$W/a" "${ARGS[@]:0:5}" x "${ARGS[@]:6}"
mpmd help "disagrees with rank 0 on command line: parsed on rank 0, --help on rank 1" \
  -- "$W/a" "${ARGS[@]}" :: "$W/a" --help

# 5. agreeing ranks: MPMD is SPMD (per-rank --threads may differ).
S=("${ARGS[@]}"); S[3]=3
run 2 "$W/a" "${S[@]}" >"$W/spmd.log" 2>&1 || { cat "$W/spmd.log"; fail "SPMD run"; }
"$MPI" --allow-run-as-root --oversubscribe -np 1 "$W/a" "${S[@]}" : -np 1 "$W/a" "${S[@]}" \
  >"$W/mpmd.log" 2>&1 || { cat "$W/mpmd.log"; fail "MPMD run of agreeing ranks"; }
[ "$(steps "$W/spmd.log" | wc -l)" = 3 ] || { cat "$W/spmd.log"; fail "SPMD: not 3 steps"; }
diff <(steps "$W/spmd.log") <(steps "$W/mpmd.log") || fail "MPMD steps differ from SPMD"
T=("${S[@]}"); T[9]=2
"$MPI" --allow-run-as-root --oversubscribe -np 1 "$W/a" "${S[@]}" : -np 1 "$W/a" "${T[@]}" \
  >"$W/threads.log" 2>&1 || { cat "$W/threads.log"; fail "per-rank --threads refused"; }
diff <(steps "$W/spmd.log") <(steps "$W/threads.log") || fail "per-rank --threads changed the steps"
echo "ok: agreeing MPMD ranks train as SPMD, per-rank --threads allowed"

# 6. what the input files hold. Two working directories, each with its own
# t.tok (other texts) and ck.safetensors (other seeds).
mkdir -p "$W/wa" "$W/wb"
cp "$TOK" "$W/wa/t.tok" || fail "copy tokens"
head -c 3000 "$TEXT" >"$W/short.txt" && "$BIN/shard-tokens" --windows "$W/short.txt" -o "$W/wb/t.tok" >/dev/null \
  || fail "shard-tokens short"
cmp -s "$W/wa/t.tok" "$W/wb/t.tok" && fail "the two token files are the same"
R=(--max-grad-norm 1 --threads 1)
mpmd data_by_content "rank 1 disagrees with rank 0 on --data: 't.tok' (" \
  -- -wdir "$W/wa" "$W/a" --data t.tok --steps 2 --lr 1e-2 "${R[@]}" \
  :: -wdir "$W/wb" "$W/a" --data t.tok --steps 2 --lr 1e-2 "${R[@]}"
for d in wa wb; do
  seed=$([ $d = wa ] && echo 1 || echo 99)
  (cd "$W/$d" && run 2 "$W/a" --data "$TOK" --steps 2 --lr 1e-2 "${R[@]}" --seed $seed \
    --save ck.safetensors >"$W/$d.log" 2>&1) || { cat "$W/$d.log"; fail "save in $d"; }
done
mpmd load_by_content "rank 1 disagrees with rank 0 on --load: 'ck.safetensors' (" \
  -- -wdir "$W/wa" "$W/a" --data "$TOK" --steps 3 "${R[@]}" --load ck.safetensors \
  :: -wdir "$W/wb" "$W/a" --data "$TOK" --steps 3 "${R[@]}" --load ck.safetensors
# one file, two spellings (and only rank 0's --save is written).
mkdir -p "$W/same"
cp "$TOK" "$W/same/t.tok" || fail "copy tokens"
"$MPI" --allow-run-as-root --oversubscribe \
  -np 1 -wdir "$W/same" "$W/a" --data t.tok --steps 3 --lr 1e-2 "${R[@]}" --save ck.safetensors \
  : -np 1 -wdir "$W" "$W/a" --data "$W/same/t.tok" --steps 3 --lr 1e-2 "${R[@]}" \
  --lr-schedule constant --save "$W/same/ck.safetensors" >"$W/spelled.log" 2>&1 \
  || { cat "$W/spelled.log"; fail "one file spelled relative and absolute refused"; }
diff <(steps "$W/spmd.log") <(steps "$W/spelled.log") || fail "two spellings: the steps differ from SPMD"
[ -s "$W/same/ck.safetensors" ] || fail "two spellings: no checkpoint saved"
echo "ok: inputs compare by content: one name for two files refused, two names for one file train as SPMD"
echo PASS
