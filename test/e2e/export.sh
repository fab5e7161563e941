#!/usr/bin/env bash
# --export DIR (issue 15): a Hugging Face model directory.
#   1. From a bf16 checkpoint sharded with an index (golden/llama-bf16-sharded),
#      loaded as a directory: the export is bf16 by default (shard-import
#      --weights --dtype bf16 checks every tensor), sharded by
#      --max-shard-size with an index, its config.json is the input's, the
#      tokenizer files beside the input are copied, and --load DIR resumes.
#   2. In f32 (--export-dtype f32: config.json says float32), resumed from the export, the run is the
#      uninterrupted run: the same loss and gradient norm at every step, and
#      its --dump equal (golden_compare, tolerances in its header).
#   3. From Gemma3ForConditionalGeneration as save_pretrained writes it: the
#      names keep the input's layout and the vision tower comes back byte for
#      byte (carried_check).
#   4. A folder an export did not write (or holding a file no export writes,
#      a symbolic link, a foreign DIR.partial, a missing parent) is refused
#      before any step and left as it was; a folder re-exported is replaced
#      whole (no stale shard).
#   A byte-level token file given to this model (which has a tokenizer) is
#   warned about, naming both, and, holding documents, refused for now.
#   5. From scratch (no --load; the config's dtype, float32), at lr 0: the
#      embedding's padding_idx row starts at zero (transformers'
#      _init_weights), here Gemma3's default pad id 0 with the vocabulary
#      sharded over tp, and the other rows do not.
# usage: export.sh GOLDEN_DIR CONFIG_DIR BIN_DIR MPIEXEC WORK_DIR
set -u
GOLDEN=$1 CONFIGS=$2 BIN=$3 MPI=$4 W=$5
BATCH=2 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W/in" || fail "cannot create $W"
L=$GOLDEN/llama-bf16-sharded
# The input directory with a tokenizer file beside it.
cp "$L"/* "$W/in/" && printf '{"version": "1.0"}\n' >"$W/in/tokenizer.json" || fail "copy"
STEP=(--batch-file "$L/batch.safetensors" --lr 1e-2 --max-grad-norm 1)
compile llama "$W/in/config.json" llama --tp-size=2 --keep-logits || fail "compile"

# A byte-level token file (version 2, "bytes") given to this model, which
# has a tokenizer: a warning naming both (the run itself trains).
"$BIN/shard-tokens" "$W/in/config.json" -o "$W/bytes.tok" >/dev/null || fail "shard-tokens bytes"
run 2 "$W/llama" --data "$W/bytes.tok" --steps 1 --lr 1e-2 --max-grad-norm 1 >"$W/bytes.log" 2>&1 \
  || { cat "$W/bytes.log"; fail "a byte-level version 2 token file does not train"; }
grep -q "train: warning: '$W/bytes.tok' holds byte-level tokens (one per byte, made without a tokenizer), but the model has its own tokenizer (the tokenizer.json beside '.*in/config.json')" "$W/bytes.log" \
  || { cat "$W/bytes.log"; fail "byte-level warning"; }

# 1. bf16, sharded, resumable.
run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 2 --export "$W/bf16" --max-shard-size 40KB \
  >"$W/bf16.log" 2>&1 || { cat "$W/bf16.log"; fail "export from a sharded bf16 directory"; }
grep -q "exported '$W/bf16' at step 2" "$W/bf16.log" || fail "no export reported"
shards=$(ls "$W/bf16" | grep -c '^model-0000[0-9]-of-0000[0-9]\.safetensors$')
[ "$shards" -ge 3 ] || fail "expected >= 3 shards of 40KB, got $shards: $(ls "$W/bf16")"
[ -f "$W/bf16/model.safetensors.index.json" ] || fail "no index"
cmp -s "$W/in/tokenizer.json" "$W/bf16/tokenizer.json" || fail "tokenizer.json not copied"
cmp -s "$W/in/config.json" "$W/bf16/config.json" || fail "a bf16 export of a bf16 config changed config.json"
"$BIN/shard-import" "$W/bf16/config.json" --batch 2 --seq 32 --dtype bf16 --weights "$W/bf16" \
  -o /dev/null >"$W/bf16.check" 2>&1 || { cat "$W/bf16.check"; fail "the export is not bf16 with every tensor"; }
run 2 "$W/llama" "${STEP[@]}" --load "$W/bf16" --steps 3 >"$W/bf16-resume.log" 2>&1 \
  || { cat "$W/bf16-resume.log"; fail "resume from the bf16 export"; }
grep -q "loaded '$W/bf16' at step 2" "$W/bf16-resume.log" || fail "the bf16 export did not resume at step 2"

# 2. f32: resuming from the export is the uninterrupted run.
run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 4 --dump "$W/direct.dump" \
  >"$W/direct.log" 2>&1 || { cat "$W/direct.log"; fail "4 steps"; }
run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 2 --export "$W/f32" --export-dtype f32 \
  >"$W/f32.log" 2>&1 || { cat "$W/f32.log"; fail "f32 export"; }
[ -f "$W/f32/model.safetensors" ] && [ ! -e "$W/f32/model.safetensors.index.json" ] \
  || fail "a model under 5GB is one model.safetensors: $(ls "$W/f32")"
grep -q '"dtype": "float32"' "$W/f32/config.json" || fail "f32 export: $(grep dtype "$W/f32/config.json")"
run 2 "$W/llama" "${STEP[@]}" --load "$W/f32" --steps 4 --dump "$W/resumed.dump" \
  >"$W/resumed.log" 2>&1 || { cat "$W/resumed.log"; fail "resume from the f32 export"; }
diff <(steps "$W/direct.log" | tail -2) <(steps "$W/resumed.log") \
  || fail "steps 3-4 resumed from the export differ from the uninterrupted run"
"$BIN/golden_compare" "$W/resumed.dump" "$W/direct.dump" >"$W/dump.cmp" 2>&1 \
  || { cat "$W/dump.cmp"; fail "the resumed run's dump differs"; }

# 3. Gemma3 conditional generation: layout and vision tower kept.
C=$GOLDEN/gemma3-cg
compile gemma "$C/config.json" gemma3 --tp-size=2 || fail "compile gemma3-cg"
run 2 "$W/gemma" --batch-file "$C/batch.safetensors" --lr 1e-2 --max-grad-norm 1 --load "$C" \
  --steps 1 --export "$W/cg" >"$W/cg.log" 2>&1 || { cat "$W/cg.log"; fail "gemma3-cg export"; }
"$BIN/carried_check" "$W/cg/model.safetensors" "$C/model.safetensors" vision_tower. \
  multi_modal_projector. || fail "the gemma3-cg export lost its layout or its vision tower"
cmp -s "$C/config.json" "$W/cg/config.json" || fail "an f32 export of an f32 config changed config.json"

# 4. Foreign folders are refused; re-exports replace the folder whole.
mkdir -p "$W/mine" && echo keep >"$W/mine/notes.txt"
expect_error "foreign folder" "--export '$W/mine' is a folder holding 'notes.txt', which no export writes" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/mine"
[ "$(ls "$W/mine")" = notes.txt ] && [ "$(cat "$W/mine/notes.txt")" = keep ] \
  || fail "a refused export changed the folder"
run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/bf16" >"$W/again.log" 2>&1 \
  || { cat "$W/again.log"; fail "re-export into an earlier export"; }
[ "$(ls "$W/bf16" | grep -c '^model-')" = 0 ] && [ -f "$W/bf16/model.safetensors" ] \
  || fail "a re-export left stale shards: $(ls "$W/bf16")"
[ ! -e "$W/bf16.partial" ] || fail "the staging folder stayed"
# Refused before any step, nothing touched: a user's file in an export, a
# symbolic link (its target would be emptied), a staging folder that is not
# one, a missing parent, '.'.
echo mine >"$W/bf16/README.md"
expect_error "foreign file in an export" "is a folder holding 'README.md', which no export writes" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/bf16"
rm "$W/bf16/README.md"
ln -s "$W/bf16" "$W/link"
expect_error "symbolic link" "'$W/link' is a symbolic link" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/link"
mkdir -p "$W/stray.partial" && echo keep >"$W/stray.partial/config.json" \
  && echo keep >"$W/stray.partial/notes.txt"
expect_error "foreign staging folder" "its staging folder '$W/stray.partial'" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/stray"
[ "$(cat "$W/stray.partial/config.json")" = keep ] || fail "a refused export touched the staging folder"
ln -s "$W/bf16" "$W/linked.partial"
expect_error "staging folder is a link" "'$W/linked.partial' is a symbolic link" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/linked"
expect_error "missing parent" "parent folder '$W/nope' is not a writable folder" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/nope/x"
expect_error "dot" "name the folder itself" -- \
  run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/."
[ -f "$W/bf16/model.safetensors" ] && [ -f "$W/bf16/config.json" ] || fail "a refusal changed bf16/"
# A trailing slash names the same folder.
run 2 "$W/llama" "${STEP[@]}" --load "$W/in" --steps 1 --export "$W/bf16/" >"$W/slash.log" 2>&1 \
  || { cat "$W/slash.log"; fail "--export DIR/"; }

# 5. A fresh model's padding row.
"$BIN/shard-tokens" --windows "$W/in/config.json" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
# The config compiled by a relative path, the program run from elsewhere:
# the tokenizer file beside the config is still found.
mkdir -p "$W/fresh-in" "$W/elsewhere" && cp "$CONFIGS/tiny-gemma3.json" "$W/fresh-in/config.json" \
  && printf '{"model_max_length": 512}\n' >"$W/fresh-in/tokenizer_config.json" || fail "fresh-in"
(cd "$W" && compile fresh fresh-in/config.json gemma3 --tp-size=2) || fail "compile tiny gemma3"
(cd "$W/elsewhere" && run 2 "$W/fresh" --data "$W/tokens.tok" --steps 1 --lr 0 --weight-decay 0 \
  --max-grad-norm 1 --export "$W/fresh-export") >"$W/fresh.log" 2>&1 \
  || { cat "$W/fresh.log"; fail "fresh export"; }
cmp -s "$W/fresh-in/tokenizer_config.json" "$W/fresh-export/tokenizer_config.json" \
  || fail "the tokenizer file beside the compiled config was not copied"
E=$W/fresh-export/model.safetensors
pad=$("$BIN/row_absmax" "$E" model.embed_tokens.weight 0) || fail "row 0"
other=$("$BIN/row_absmax" "$E" model.embed_tokens.weight 200) || fail "row 200"
[ "$pad" = 0 ] || fail "the padding row 0 starts at max |x| $pad, not 0"
awk -v x="$other" 'BEGIN { exit !(x > 0.01) }' || fail "row 200 starts at max |x| $other"
echo "ok: fresh pad row max |x| $pad, another row $other"
echo PASS
