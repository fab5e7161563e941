#!/usr/bin/env bash
# Issue 39 items 5 and 6 (train side): refused before step 1, not after
# training, and files that other tools read:
#   1. --metrics, --save or --dump inside the --export folder (or its
#      staging folder) is refused at start naming both paths;
#   2. a job whose working directory was removed refuses relative paths at
#      start (they failed at the save, after training); absolute ones run;
#   3. --eval-batches beyond the batches that start inside the eval file is
#      refused at start with the limit (1e9 never finished);
#   4. a --metrics file whose last line was torn gets the next run's first
#      record on a line of its own, and shard-plot draws it (skipping the
#      fragment with a warning).
# usage: places.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=2 SEQ=16
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile tp1 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=1 || exit 1
T=(--data "$W/tokens.tok" --steps 2 --lr 1e-3 --max-grad-norm 1)

# 1. Outputs inside the export folder.
expect_error "--metrics in --export" "--metrics '$W/e/m.jsonl' lies inside the --export folder '$W/e'" -- \
  run 1 "$W/tp1" "${T[@]}" --export "$W/e" --metrics "$W/e/m.jsonl"
expect_error "--save in --export" "--save '$W/e/sub/../ck.safetensors' lies inside the --export folder '$W/e'" -- \
  run 1 "$W/tp1" "${T[@]}" --export "$W/e/" --save "$W/e/sub/../ck.safetensors"
expect_error "--dump in the staging folder" "--dump '$W/e.partial/d.safetensors' lies inside the --export folder '$W/e' (its staging folder)" -- \
  run 1 "$W/tp1" "${T[@]}" --export "$W/e" --dump "$W/e.partial/d.safetensors"
[ ! -e "$W/e" ] || fail "a refused run made the export folder"
run 1 "$W/tp1" "${T[@]}" --export "$W/e" --metrics "$W/e-metrics.jsonl" >"$W/ok.log" 2>&1 \
  || { cat "$W/ok.log"; fail "--metrics beside the export folder"; }
echo "ok: outputs inside the --export folder refused at start; beside it they run"

# 2. The working directory removed under the job.
mkdir -p "$W/gone"
expect_error "relative --save, working directory removed" \
  "--save 'ck.safetensors' is relative, but the working directory this job started in has been removed" -- \
  bash -c 'cd "$1/gone" && rmdir "$1/gone" && shift && exec "$@"' _ "$W" \
  "$W/tp1" "${T[@]}" --save ck.safetensors
mkdir -p "$W/gone"
bash -c 'cd "$1/gone" && rmdir "$1/gone" && shift && exec "$@"' _ "$W" \
  "$W/tp1" "${T[@]}" --save "$W/abs.safetensors" >"$W/abs.log" 2>&1 \
  || { cat "$W/abs.log"; fail "absolute paths with the working directory removed"; }
[ -s "$W/abs.safetensors" ] || fail "no checkpoint from the absolute --save"
echo "ok: a removed working directory refuses relative paths at start; absolute ones run"

# 3. --eval-batches past the eval file: 25902 tokens here, 810 batches of 2 x 16.
head -c 100 "$TEXT" >"$W/ev.txt"
"$BIN/shard-tokens" --windows "$W/ev.txt" -o "$W/ev.tok" >/dev/null || fail "shard-tokens eval"
expect_error "--eval-batches 1e9" "--eval-batches 1000000000: '$W/ev.tok' holds" \
  "give --eval-batches 4 or fewer" -- \
  timeout 60 "$W/tp1" "${T[@]}" --eval-data "$W/ev.tok" --eval-batches 1000000000
grep -q "^step 1/" "$W/err.log" && fail "--eval-batches refused only after step 1"
"$W/tp1" "${T[@]}" --eval-data "$W/ev.tok" --eval-batches 4 >"$W/ev.log" 2>&1 \
  || { cat "$W/ev.log"; fail "--eval-batches at the limit"; }
grep -q "^eval step 2: .*(4 batches of 2 x 16 tokens)" "$W/ev.log" || { cat "$W/ev.log"; fail "no evaluation"; }
echo "ok: --eval-batches past the eval file refused at start with its limit"

# 4. A torn --metrics line: the next record starts a line of its own.
printf '{"step": 1, "loss": 5.5, "lr": 0.001}\n{"step": 2, "lo' >"$W/m.jsonl"
"$W/tp1" "${T[@]}" --metrics "$W/m.jsonl" >"$W/m.log" 2>&1 || { cat "$W/m.log"; fail "append to a torn metrics file"; }
[ "$(wc -l <"$W/m.jsonl")" = 4 ] || { cat "$W/m.jsonl"; fail "expected 4 lines (2 old, 2 new)"; }
sed -n 2p "$W/m.jsonl" | grep -qx '{"step": 2, "lo' || { cat "$W/m.jsonl"; fail "the fragment is not a line of its own"; }
sed -n 3p "$W/m.jsonl" | grep -q '^{"step": 1, "loss": ' || { cat "$W/m.jsonl"; fail "the first new record is not a line of its own"; }
"$BIN/shard-plot" "$W/m.jsonl" -o "$W/m.svg" >"$W/plot.log" 2>&1 || { cat "$W/plot.log"; fail "shard-plot"; }
grep -q "warning: '$W/m.jsonl' line 2: .*left out" "$W/plot.log" || { cat "$W/plot.log"; fail "no warning for the fragment"; }
grep -q "2 steps from" "$W/plot.log" || { cat "$W/plot.log"; fail "shard-plot did not draw both steps"; }
echo "ok: a torn metrics line is ended before the next run appends; shard-plot skips it"

# 5. The tokenizer is the one beside the config at compile time, checked
#    against the vocabulary (256 ids here) and compiled in: an export writes
#    it even after the binary moved and another tokenizer.json replaced it.
mkdir -p "$W/model" "$W/moved"
cp "$CONFIGS/tiny-qwen2.json" "$W/model/config.json"
printf '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 255}}, "added_tokens": [{"id": 255, "content": "<e>"}]}\n' \
  >"$W/model/tokenizer.json"
cp "$W/model/tokenizer.json" "$W/tokenizer.compiled"
echo '{"model_max_length": 32}' >"$W/model/tokenizer_config.json"
compile tok "$W/model/config.json" qwen2 --tp-size=1 || exit 1
mv "$W/tok" "$W/moved/tok"
sleep 0.01 # a later modification time than the program's
printf '{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "z": 699}}}\n' >"$W/model/tokenizer.json"
echo '{"a": 0, "z": 699}' >"$W/model/vocab.json" # copied, not compiled in: said
"$W/moved/tok" "${T[@]}" --export "$W/tok-export" >"$W/tok.log" 2>&1 || { cat "$W/tok.log"; fail "export"; }
cmp -s "$W/tokenizer.compiled" "$W/tok-export/tokenizer.json" \
  || fail "the export's tokenizer.json is not the one compiled in: $(cat "$W/tok-export/tokenizer.json" 2>&1)"
grep -q "warning: export: '.*vocab.json' changed after this program was compiled" "$W/tok.log" \
  || { cat "$W/tok.log"; fail "no warning for a vocab.json written after the compile"; }
grep -q "tokenizer_config.json' changed" "$W/tok.log" && fail "a warning for a file older than the program"
# The 700-id tokenizer itself is refused by shard-compile with both numbers.
expect_error "a 700-id tokenizer for a 256-id model" \
  "tokenizer.json' (beside the config) holds token id 699, past the config's vocab_size 256" -- \
  compile tok700 "$W/model/config.json" qwen2 --tp-size=1
[ ! -e "$W/tok700" ] || fail "a refused compile wrote its output"
echo "ok: the tokenizer compiled in is exported (binary moved, file replaced); a 700-id one is refused"
