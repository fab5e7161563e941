#!/usr/bin/env bash
# The command-line abuse battery: every tool and the training driver given
# missing, duplicated, unknown and odd flags, huge, negative and malformed
# numbers, directories, device files, FIFOs, empty and truncated files,
# hostile configs, plans and IR. Each case must
#   - exit non-zero, and not by a signal, a sanitizer report or a hang;
#   - print a message holding one of the case's expected strings (the flag,
#     the value or the file at fault);
#   - leave every input file and device node as it was (contents, type,
#     mode, size, mtime), checked after each case, and write no output.
# Prints the counts and every failing case; exits 1 if any case fails.
# BATTERY_LOG=FILE also writes each case's command and message there.
# usage: battery.sh BIN_DIR SOURCE_DIR [TRAIN_EXE]
set -u
BIN=$1 SRC=$2 TRAIN=${3:-$1/train_tiny_dp1_tp1}
SI=$BIN/shard-import SO=$BIN/shard-opt SC=$BIN/shard-compile ST=$BIN/shard-tokens TR=$TRAIN
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
F=$T/in O=$T/out
mkdir -p "$F" "$O"
die() { echo "battery: setup: $*" >&2; exit 1; }

#===------------------------------------------------------------------===#
# Fixtures (inputs that must not change)
#===------------------------------------------------------------------===#
cp "$SRC/examples/tiny-qwen2-bytes.json" "$F/config.json"
"$SI" "$F/config.json" --batch 1 --seq 8 -o "$F/model.mlir" || die "shard-import"
cp "$SRC/examples/data/shard-tales.txt" "$F/text.txt"
"$ST" --windows "$F/text.txt" -o "$F/data.tokens" >/dev/null || die "shard-tokens"
mkdir -p "$F/ck"
ASAN_OPTIONS=detect_leaks=0 "$TR" --data "$F/data.tokens" --steps 2 --lr 1e-3 --max-grad-norm 1 \
  --save "$F/ck/model.safetensors" >/dev/null || die "train --save"
printf '{"model.layers.*.mlp.up_proj": "colwise", "model.layers.*.mlp.down_proj": "rowwise"}\n' \
  >"$F/plan.json"
: >"$F/empty"
mkdir -p "$F/dir"
head -c 100 "$F/ck/model.safetensors" >"$F/trunc.safetensors"
head -c 20 "$F/data.tokens" >"$F/trunc.tokens"
head -c 37 "$F/config.json" >"$F/trunc.json"
head -c 2048 "$F/data.tokens" | tail -c 1024 >"$F/garbage"
mkfifo "$F/fifo"
ln -s "$F/dir" "$F/dirlink"
# A token file declaring vocabulary 65536 with ids the byte-level model lacks.
{ printf 'SRTTOKS\0\001\000\002\000\000\000\000\000\040\000\000\000\000\000\000\000'
  printf '\000\000\001\000\000\000\000\000'
  for _ in $(seq 32); do printf '\377\377'; done; } >"$F/big-vocab.tokens"
# A version 2 token file whose document index ends one token short (bytes:
# the index's end at byte 72), and prompt-completion JSONL with an empty
# completion and with a line lacking the completion.
printf 'a few bytes of text' >"$F/docs.txt"
"$ST" "$F/docs.txt" -o "$F/short-index.tokens" >/dev/null || die "shard-tokens docs"
printf '\022' | dd of="$F/short-index.tokens" bs=1 seek=72 conv=notrunc status=none
printf '{"prompt": "Q: a\\nA:", "completion": " b"}\n{"prompt": "Q: c\\nA:", "completion": ""}\n' \
  >"$F/empty-completion.jsonl"
printf '{"prompt": "Q: a\\nA:", "completion": " b"}\n{"prompt": "Q: c\\nA:"}\n' >"$F/no-completion.jsonl"
# A checkpoint with one flipped bit in its tensor data (the last byte).
cp "$F/ck/model.safetensors" "$F/flipped.safetensors"
size=$(stat -c %s "$F/flipped.safetensors")
last=$(tail -c 1 "$F/flipped.safetensors" | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $((last ^ 1)))" |
  dd of="$F/flipped.safetensors" bs=1 seek=$((size - 1)) conv=notrunc status=none
# Hugging Face batch files for the tiny driver (batch 4 x seq 16; issue 41),
# each with one bad tensor beside zero input_ids and labels.
le64() { local h; h=$(printf '%016x' "$1"); for i in 14 12 10 8 6 4 2 0; do printf '%b' "\\x${h:$i:2}"; done; }
hf_batch() { # NAME TENSOR DTYPE SHAPE BYTES-FILE: batch-NAME.safetensors
  local n=512 m; m=$(stat -c %s "$5")
  local hdr="{\"input_ids\":{\"dtype\":\"I64\",\"shape\":[4,16],\"data_offsets\":[0,$n]},\"labels\":{\"dtype\":\"I64\",\"shape\":[4,16],\"data_offsets\":[$n,$((2 * n))]},\"$2\":{\"dtype\":\"$3\",\"shape\":$4,\"data_offsets\":[$((2 * n)),$((2 * n + m))]}}"
  { le64 "${#hdr}"; printf '%s' "$hdr"; head -c $((2 * n)) /dev/zero; cat "$5"; } >"$F/batch-$1.safetensors"
}
hf_values() { # V...: 64 I64 values, the given ones first, zeros after
  local k=0; for v in "$@"; do le64 "$v"; ((k++)); done
  head -c $(((64 - k) * 8)) /dev/zero
}
hf_values 0 1 2 3 4 -1 >"$F/pos-neg.bin"
hf_values 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 2 >"$F/mask-2.bin"
head -c 256 /dev/zero >"$F/i32.bin"
hf_batch extra token_type_ids I64 "[4,16]" "$F/mask-2.bin"
hf_batch pos-neg position_ids I64 "[4,16]" "$F/pos-neg.bin"
hf_batch pos-i32 position_ids I32 "[4,16]" "$F/i32.bin"
hf_batch pos-rank1 position_ids I64 "[64]" "$F/pos-neg.bin"
hf_batch pos-shape position_ids I64 "[8,8]" "$F/pos-neg.bin"
hf_batch mask-2 attention_mask I64 "[4,16]" "$F/mask-2.bin"
hf_batch mask-f32 attention_mask F32 "[4,16]" "$F/i32.bin"
# Configs with one hostile value each (name -> JSON edit of the tiny config).
hostile_config() { # NAME KEY VALUE: config.json with "KEY": VALUE
  sed -E "s/^(  \"$2\": )[^,]*(,?)\$/\1$3\2/" "$F/config.json" >"$F/cfg-$1.json"
  grep -qF "\"$2\": $3" "$F/cfg-$1.json" || die "hostile config $1"
}
hostile_config rope-tiny rope_theta 1e-308
hostile_config rope-nan rope_theta NaN
hostile_config rope-neg rope_theta -10000
hostile_config init-huge initializer_range 1e308
hostile_config init-tiny initializer_range 1e-308
hostile_config init-neg initializer_range -0.02
hostile_config eps-huge rms_norm_eps 1e308
hostile_config eps-zero rms_norm_eps 0
hostile_config eps-neg rms_norm_eps -1e-6
hostile_config hidden-neg hidden_size -128
hostile_config hidden-zero hidden_size 0
hostile_config hidden-huge hidden_size 99999999999999999999
hostile_config hidden-float hidden_size 128.5
hostile_config hidden-string hidden_size '"128"'
hostile_config hidden-space hidden_size '" 128"'
hostile_config hidden-bool hidden_size true
hostile_config hidden-null hidden_size null
hostile_config heads-zero num_attention_heads 0
hostile_config heads-odd num_attention_heads 3
hostile_config kv-heads-odd num_key_value_heads 3
hostile_config kv-heads-more num_key_value_heads 8
hostile_config layers-neg num_hidden_layers -2
hostile_config layers-huge num_hidden_layers 1000000000
hostile_config inter-zero intermediate_size 0
hostile_config vocab-zero vocab_size 0
hostile_config vocab-huge vocab_size 1e30
hostile_config act-unknown hidden_act '"gelu_new_made_up"'
hostile_config arch-unknown architectures '["MadeUpForCausalLM"]'
hostile_config arch-empty architectures '[]'
hostile_config tie-string tie_word_embeddings '"yes"'
hostile_config maxpos-zero max_position_embeddings 0
printf '{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 128, "hidden_size": 64}\n' \
  >"$F/cfg-duplicate-key.json"
printf '%*s' 100000 '' | tr ' ' '[' >"$F/cfg-deep.json"
printf '[1, 2, 3]\n' >"$F/cfg-array.json"
printf '\xff\xfe{}\n' >"$F/cfg-not-utf8.json"
# Absent keys take the config class's defaults (a bare Qwen2 config is
# Qwen2Config()); NemotronH's block list has none.
printf '{"architectures": ["NemotronHForCausalLM"]}\n' >"$F/cfg-sparse.json"
# Plans with one hostile entry each (a plan entry that matches no module is
# only a warning, as in the reference, so it is not among them).
PLAN_EXPECT=()
plan() { printf '%s\n' "$3" >"$F/plan-$1.json"; PLAN_EXPECT+=("plan-$1.json|$2"); }
plan style-unknown "diagonalwise" '{"model.layers.*.mlp.up_proj": "diagonalwise"}'
plan shard-neg "Shard(-99)" '{"lm_head": {"style": "colwise", "output_layouts": "Shard(-99)"}}'
plan shard-huge "Shard(2147483648)" '{"lm_head": {"style": "colwise", "output_layouts": "Shard(2147483648)"}}'
plan shard-text "Shard(x)" '{"lm_head": {"style": "colwise", "output_layouts": "Shard(x)"}}'
plan key-unknown "outputs" '{"lm_head": {"style": "colwise", "outputs": "Replicate"}}'
plan empty "empty" '{}'
plan array "JSON object" '["colwise"]'
plan number "lm_head" '{"lm_head": 7}'
plan local-output "use_local_output" '{"lm_head": {"style": "colwise", "use_local_output": "yes"}}'
plan layouts-many "input_layouts" '{"lm_head": {"style": "colwise", "input_layouts": ["Replicate","Replicate","Replicate","Replicate","Replicate","Replicate","Replicate","Replicate","Replicate"]}}'
plan duplicate "lm_head" '{"lm_head": "colwise", "lm_head": "rowwise"}'
plan malformed "malformed" '{"lm_head": "colwise",'
plan rowwise-on-norm "model.norm" '{"model.norm": "rowwise"}'
# IR that parses but is not a model, or does not parse.
printf 'module {\n  func.func @forward(%%a: tensor<2xf32>) -> tensor<2xf32> {\n    %%c = arith.constant dense<1.0> : tensor<2xf32>\n    return %%c : tensor<2xf32>\n  }\n}\n' \
  >"$F/ir-constant.mlir"
printf 'module {\n  "made.up"() : () -> ()\n}\n' >"$F/ir-unregistered.mlir"
printf 'module {\n  func.func @forward( {\n' >"$F/ir-malformed.mlir"
head -c 300 "$F/model.mlir" >"$F/ir-truncated.mlir"
printf '\x00\x01\x02MLIR' >"$F/ir-binary.mlir"
# A --weights directory whose index is a FIFO.
mkdir -p "$F/wfifo" && mkfifo "$F/wfifo/model.safetensors.index.json"
# Checkpoints whose metadata lies (the header rewritten, the data kept).
remeta() { # SRC DST KEY=VALUE...
  python3 - "$@" <<'PY' || die "remeta $2"
import json, struct, sys
src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
for e in edits:
    k, v = e.split("=", 1)
    header["__metadata__"][k] = v
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
}
optim=$(ls "$F/ck/" | grep optim)
mkdir -p "$F/ck-adam" "$F/ck-huge"
remeta "$F/ck/model.safetensors" "$F/ck-adam/model.safetensors" shardrt.adam_step=9
cp "$F/ck/$optim" "$F/ck-adam/$optim"
remeta "$F/ck/model.safetensors" "$F/ck-huge/model.safetensors" \
  shardrt.step=9223372036854775806 shardrt.adam_step=9223372036854775806
remeta "$F/ck/$optim" "$F/ck-huge/$optim" \
  shardrt.step=9223372036854775806 shardrt.adam_step=9223372036854775806
if [ "$(id -u)" -eq 0 ]; then
  # Private device nodes (never the machine's own /dev/null).
  mknod "$F/null" c 1 3 && mknod "$F/full" c 1 7 && mknod "$F/zero" c 1 5 || die "mknod"
  DEVICES=1
else
  DEVICES=0
fi
LONG=$F/$(printf 'x%.0s' $(seq 5000))

snapshot() {
  (cd "$F" && find . -printf '%p %y %m %s %T@\n' | sort &&
     find . -type f -exec sha256sum {} + | sort)
}
BEFORE=$(snapshot)

#===------------------------------------------------------------------===#
# Cases: case EXPECTED -- COMMAND...  (EXPECTED: fixed strings, '|'-separated,
# at least one of which the message must hold)
#===------------------------------------------------------------------===#
NAMES=() EXPECTS=() CMDS=()
case_() {
  local expect=$1; shift
  [ "$1" = "--" ] && shift
  EXPECTS+=("$expect")
  CMDS+=("$(printf '%q ' "$@")")
}

# Valid base commands; each case breaks one thing.
SI_OK=("$SI" "$F/config.json" --batch 1 --seq 8 -o "$O/m.mlir")
SC_OK=("$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir")
SO_OK=("$SO" "$F/model.mlir" --tp-plan=qwen2 --tp-size=2 -o "$O/o.mlir")
TR_OK=("$TR" --data "$F/data.tokens" --steps 1 --lr 1e-3 --max-grad-norm 1)

# Numbers that no count accepts.
BAD_COUNTS=("" "0" "-1" "abc" "1.5" "99999999999999999999" "-99999999999999999999" " 5" "5 "
            "5x" "0x10" "1e3" "nan" "+-1")
# Numbers that no real-valued option accepts.
BAD_REALS=("" "abc" "nan" "NaN" "inf" "-inf" "1e999" "1e39" " 0.1" "0.1x" "0.1.2" "--")

# shard-import: counts, given as the only broken value.
for v in "${BAD_COUNTS[@]}"; do
  case_ "--batch|$v" -- "$SI" "$F/config.json" --batch "$v" --seq 8 -o "$O/m.mlir"
  case_ "--seq|$v" -- "$SI" "$F/config.json" --batch 1 --seq "$v" -o "$O/m.mlir"
done
case_ "--seq" -- "$SI" "$F/config.json" --batch 1 --seq 1 -o "$O/m.mlir"
# shard-compile: counts.
for v in "${BAD_COUNTS[@]}"; do
  case_ "--tp-size|$v" -- "$SC" "$F/config.json" --tp-plan=qwen2 "--tp-size=$v" --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
  case_ "--dp-size|$v" -- "${SC_OK[@]}" "--dp-size=$v"
  case_ "--batch|$v" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch "$v" --seq 8 --emit=mlir -o "$O/c.mlir"
done
for v in "" "0" "-1" "abc" "99999999999999999999" " 2" "2x"; do
  case_ "--tp-size|$v" -- "$SO" "$F/model.mlir" --tp-plan=qwen2 "--tp-size=$v" -o "$O/o.mlir"
  case_ "--dp-size|$v" -- "${SO_OK[@]}" "--dp-size=$v"
done
# The driver: counts and reals.
for v in "${BAD_COUNTS[@]}"; do
  case_ "--steps|$v" -- "$TR" --data "$F/data.tokens" --steps "$v" --lr 1e-3 --max-grad-norm 1
  case_ "--log-every|$v" -- "${TR_OK[@]}" --log-every "$v"
done
for v in "-1" "abc" "99999999999999999999" " 5" "5x" "1.5"; do
  case_ "--save-every|$v" -- "${TR_OK[@]}" --save-every "$v"
  case_ "--max-skipped|$v" -- "${TR_OK[@]}" --max-skipped "$v"
  case_ "--seed|$v" -- "${TR_OK[@]}" --seed "$v"
done
for v in "${BAD_REALS[@]}" "-1"; do
  case_ "--lr|$v" -- "$TR" --data "$F/data.tokens" --steps 1 --lr "$v" --max-grad-norm 1
  case_ "--eps|$v" -- "${TR_OK[@]}" --eps "$v"
  case_ "--weight-decay|$v" -- "${TR_OK[@]}" --weight-decay "$v"
  # A timeout is a double: 1e39 s is a (very long) valid deadline.
  [ "$v" = 1e39 ] || case_ "--timeout|$v" -- "${TR_OK[@]}" --timeout "$v"
done
for v in "0" "-1" "abc" "99999999999999999999" " 2" "2x" "1.5" "4097"; do
  case_ "--threads|$v" -- "${TR_OK[@]}" --threads "$v"
done
case_ "--profile given twice" -- "${TR_OK[@]}" --profile --profile
case_ "--profile=1" -- "${TR_OK[@]}" --profile=1
for v in "${BAD_REALS[@]}"; do
  case_ "--max-grad-norm|$v" -- "$TR" --data "$F/data.tokens" --steps 1 --lr 1e-3 --max-grad-norm "$v"
done
case_ "--eps" -- "${TR_OK[@]}" --eps 0
for v in "0" "-2" "abc" "nan" "1e999" "-inf"; do
  case_ "--norm-type|$v" -- "${TR_OK[@]}" --norm-type "$v"
done
for v in "0.9" "0.9," ",0.999" "1,0.999" "0.9,1" "-0.1,0.9" "a,b" "0.9,0.999,0.5" "nan,0.9" ""; do
  case_ "--betas|$v" -- "${TR_OK[@]}" --betas "$v"
done

# Missing values: each value flag given last.
for f in --batch --seq --dtype --weights -o; do case_ "$f" -- "$SI" "$F/config.json" "$f"; done
for f in --batch --seq --weights -o --tp-plan --tp-size --dp-size --emit --backend; do
  case_ "$f" -- "$SC" "$F/config.json" "$f"
done
for f in -o --tp-plan --tp-size --dp-size --pass-pipeline; do case_ "$f" -- "$SO" "$F/model.mlir" "$f"; done
case_ "-o" -- "$ST" "$F/text.txt" -o
for f in --data --steps --lr --max-grad-norm --betas --eps --weight-decay --norm-type --load \
         --save --save-every --seed --log-every --dump --max-skipped --timeout --batch-file \
         --threads; do
  case_ "$f" -- "${TR_OK[@]}" "$f"
done
# Required flags left out.
case_ "--batch" -- "$SI" "$F/config.json" --seq 8
case_ "--seq" -- "$SI" "$F/config.json" --batch 1
case_ "CONFIG|config" -- "$SI" --batch 1 --seq 8
case_ "--tp-plan" -- "$SC" "$F/config.json" --tp-size=1 --batch 1 --seq 8 -o "$O/c"
case_ "-o|output" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8
case_ "--batch" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --seq 8 -o "$O/c"
case_ "--data" -- "$TR" --steps 1 --lr 1e-3 --max-grad-norm 1
case_ "--steps" -- "$TR" --data "$F/data.tokens" --lr 1e-3 --max-grad-norm 1
case_ "--lr" -- "$TR" --data "$F/data.tokens" --steps 1 --max-grad-norm 1
case_ "--max-grad-norm" -- "$TR" --data "$F/data.tokens" --steps 1 --lr 1e-3
case_ "-o|output" -- "$ST" "$F/text.txt"
case_ "input|INPUT" -- "$ST" -o "$O/t.tokens"
# Duplicated flags.
case_ "--batch" -- "${SI_OK[@]}" --batch 2
case_ "--seq" -- "${SI_OK[@]}" --seq 4
case_ "-o" -- "${SI_OK[@]}" -o "$O/m2.mlir"
case_ "--dtype" -- "${SI_OK[@]}" --dtype f32 --dtype bf16
case_ "--tp-size" -- "${SC_OK[@]}" --tp-size=2
case_ "--tp-plan" -- "${SC_OK[@]}" --tp-plan=llama
case_ "--batch" -- "${SC_OK[@]}" --batch 2
case_ "--emit" -- "${SC_OK[@]}" --emit=llvm
case_ "-o" -- "${SC_OK[@]}" -o "$O/c2.mlir"
case_ "--tp-size" -- "${SO_OK[@]}" --tp-size=4
case_ "--tp-plan" -- "${SO_OK[@]}" --tp-plan=llama
case_ "-o" -- "${SO_OK[@]}" -o "$O/o2.mlir"
case_ "-o" -- "$ST" "$F/text.txt" -o "$O/a.tokens" -o "$O/b.tokens"
for f in "--steps 2" "--lr 1e-2" "--max-grad-norm 2" "--data $F/data.tokens" "--seed 3 --seed 4" \
         "--save $O/a.st --save $O/b.st" "--eps 1e-8 --eps 1e-6" "--timeout 5 --timeout 6" \
         "--threads 1 --threads 2"; do
  # shellcheck disable=SC2086
  case_ "${f%% *}" -- "${TR_OK[@]}" $f
done
# Unknown and odd flags.
for f in --bogus -x --BATCH ---batch --batch=; do
  case_ "${f%=}" -- "${SI_OK[@]}" "$f"
done
case_ "more than one config: '$F/config.json' and '-'" -- "${SI_OK[@]}" -
case_ "unknown option '--'" -- "${SI_OK[@]}" --
for f in --bogus --tp_size=2 --tp-size --emit=exe2 --backend=tpu --emit= --backend=; do
  case_ "${f%%=*}|${f#*=}" -- "${SC_OK[@]}" "$f"
done
for f in --bogus-pass --tp-size=2=3 --sequence-parallel=maybe; do case_ "${f%%=*}" -- "${SO_OK[@]}" "$f"; done
for f in --bogus -x --help2; do case_ "$f" -- "$ST" "$F/text.txt" -o "$O/t.tokens" "$f"; done
case_ "second input|$F/config.json" -- "$ST" "$F/text.txt" "$F/config.json" -o "$O/t.tokens"
for f in --bogus --steps=1 -s --data=x; do case_ "$f" -- "${TR_OK[@]}" "$f" 1; done
case_ "--dtype|f16" -- "${SI_OK[@]}" --dtype f16
case_ "--dtype|bf32" -- "${SI_OK[@]}" --dtype bf32
case_ "second|$F/config.json" -- "${SI_OK[@]}" "$F/config.json"
case_ "--data|--batch-file" -- "${TR_OK[@]}" --batch-file "$F/ck/model.safetensors"

# Paths: missing, directories, FIFOs, symlinks to directories, empty,
# truncated, garbage, too long, devices.
BAD_PATHS=("$F/no-such-file" "$F/dir" "$F/dirlink" "$F/fifo" "$F/empty" "$F/garbage" "$LONG" "")
((DEVICES)) && BAD_PATHS+=("$F/null" "$F/zero")
for p in "${BAD_PATHS[@]}"; do
  want=${p:+${p##*/}}
  want=${want:-empty path}
  [ "$p" = "$LONG" ] && want="longer than the system allows|File name too long"
  case_ "$want" -- "$SI" "$p" --batch 1 --seq 8 -o "$O/m.mlir"
  case_ "$want" -- "${SI_OK[@]}" --weights "$p"
  case_ "$want" -- "$SC" "$p" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
  case_ "$want" -- "${SC_OK[@]}" --weights "$p"
  case_ "$want|--tp-plan" -- "$SC" "$F/config.json" "--tp-plan=$p" --tp-size=2 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
  case_ "$want|--tp-plan" -- "$SO" "$F/model.mlir" "--tp-plan=$p" --tp-size=2 -o "$O/o.mlir"
  [ "$p" = "$F/garbage" ] || case_ "$want" -- "$ST" "$p" -o "$O/t.tokens" # bytes are its input
  case_ "$want" -- "$TR" --data "$p" --steps 1 --lr 1e-3 --max-grad-norm 1
  case_ "$want" -- "${TR_OK[@]}" --load "$p"
  case_ "$want" -- "$TR" --batch-file "$p" --steps 1 --lr 1e-3 --max-grad-norm 1
done
# (An empty file is an empty module, as for mlir-opt.)
for p in "$F/no-such-file" "$F/dir" "$F/fifo" "$F/garbage" "$F/ir-binary.mlir" \
         "$F/ir-truncated.mlir" "$F/ir-malformed.mlir"; do
  case_ "${p##*/}" -- "$SO" "$p" --nn-verify -o "$O/o.mlir"
done
((DEVICES)) && case_ "zero" -- "$SO" "$F/zero" --nn-verify -o "$O/o.mlir"
# Files of the wrong kind.
for b in extra pos-neg pos-i32 pos-rank1 pos-shape mask-2 mask-f32; do
  case "$b" in
    extra) want="tensor 'token_type_ids' is not one the driver reads" ;;
    pos-neg) want="position_ids[0][5] = -1 is negative" ;;
    pos-i32) want="'position_ids' must be I64 [4, 16]" ;;
    pos-rank1) want="got I64 [64]" ;;
    pos-shape) want="got I64 [8, 8]" ;;
    mask-2) want="attention_mask[1][3] = 2 is neither 0" ;;
    mask-f32) want="'attention_mask' must be I64, I32, I8, U8 or BOOL" ;;
  esac
  case_ "$want" -- "$TR" --batch-file "$F/batch-$b.safetensors" --steps 1 --lr 1e-3 --max-grad-norm 1
done
case_ "trunc.tokens" -- "$TR" --data "$F/trunc.tokens" --steps 1 --lr 1e-3 --max-grad-norm 1
case_ "config.json" -- "$TR" --data "$F/config.json" --steps 1 --lr 1e-3 --max-grad-norm 1
case_ "big-vocab.tokens" -- "$TR" --data "$F/big-vocab.tokens" --steps 1 --lr 1e-3 --max-grad-norm 1
case_ "ends at token 18, but the file has 19 tokens" -- "$TR" --data "$F/short-index.tokens" --steps 1 \
  --lr 1e-3 --max-grad-norm 1
QWEN_TOK=$SRC/test/tokenizers/bytelevel-qwen2/tokenizer.json
case_ "empty-completion.jsonl' line 2: empty completion" -- \
  "$ST" --tokenizer "$QWEN_TOK" "$F/empty-completion.jsonl" -o "$O/t.tokens"
case_ "no-completion.jsonl' line 2: no string field 'completion'" -- \
  "$ST" --tokenizer "$QWEN_TOK" "$F/no-completion.jsonl" -o "$O/t.tokens"
case_ "trunc.safetensors" -- "${TR_OK[@]}" --load "$F/trunc.safetensors"
case_ "data.tokens|SRTTOKS" -- "${TR_OK[@]}" --load "$F/data.tokens"
case_ "flipped.safetensors|checksum" -- "${TR_OK[@]}" --load "$F/flipped.safetensors"
case_ "at step 2|--steps" -- "${TR_OK[@]}" --load "$F/ck/model.safetensors"
case_ "trunc.safetensors" -- "${SI_OK[@]}" --weights "$F/trunc.safetensors"
case_ "99999999999999999999" -- "$SI" "$F/cfg-hidden-huge.json" --batch 1 --seq 8 --weights "$F/ck/model.safetensors"
case_ "trunc.json" -- "$SI" "$F/trunc.json" --batch 1 --seq 8
case_ "text.txt" -- "$SI" "$F/text.txt" --batch 1 --seq 8
case_ "model.mlir" -- "$SI" "$F/model.mlir" --batch 1 --seq 8
case_ "data.tokens" -- "$SC" "$F/data.tokens" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 -o "$O/c"
case_ "config.json" -- "$SO" "$F/config.json" --nn-verify
case_ "trunc.json|--tp-plan" -- "$SO" "$F/model.mlir" "--tp-plan=$F/trunc.json" --tp-size=2
case_ "FIFO" -- "${SI_OK[@]}" --weights "$F/wfifo"
case_ "FIFO" -- "${SC_OK[@]}" --weights "$F/wfifo"
case_ "adam_step 9 is above shardrt.step 2" -- "$TR" --data "$F/data.tokens" --steps 4 --lr 1e-3 --max-grad-norm 1 --load "$F/ck-adam/model.safetensors"
case_ "not a step count" -- "$TR" --data "$F/data.tokens" --steps 4 --lr 1e-3 --max-grad-norm 1 --load "$F/ck-huge/model.safetensors"
case_ "--steps" -- "$TR" --data "$F/data.tokens" --steps 9223372036854775807 --lr 1e-3 --max-grad-norm 1
case_ "--lr|rounds to 0" -- "$TR" --data "$F/data.tokens" --steps 1 --lr 1e-46 --max-grad-norm 1
case_ "--eps|out of the range" -- "${TR_OK[@]}" --eps 1e-320
NAME240=$O/$(printf 'n%.0s' $(seq 240)) NAME253=$O/$(printf 'n%.0s' $(seq 253))
case_ "NAME_MAX" -- "${TR_OK[@]}" --save "$NAME240"
case_ "NAME_MAX" -- "${TR_OK[@]}" --dump "$NAME253"
case_ "NAME_MAX" -- "$SI" "$F/config.json" --batch 1 --seq 8 -o "$NAME253"
case_ "NAME_MAX" -- "$SO" "$F/model.mlir" --nn-verify -o "$NAME253"
case_ "NAME_MAX" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$NAME253"
case_ "NAME_MAX" -- "$ST" "$F/text.txt" -o "$NAME253"
case_ "-o" -- "$SO" "$F/model.mlir" --nn-verify -o "$O/a.mlir" "-o$O/b.mlir"
# Outputs that must not be written: directories, FIFOs, the inputs, paths
# in missing folders or too long, a device that fails writes.
BAD_OUTS=("$F/dir" "$F/fifo" "$F/dirlink" "$O/no-such-dir/x" "$LONG" "")
((DEVICES)) && BAD_OUTS+=("$F/full")
for p in "${BAD_OUTS[@]}"; do
  want=${p:+${p##*/}|-o}
  want=${want:-empty path}
  [ "$p" = "$LONG" ] && want="longer than the system allows|File name too long"
  case_ "$want" -- "$SI" "$F/config.json" --batch 1 --seq 8 -o "$p"
  case_ "$want" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$p"
  case_ "$want" -- "$SO" "$F/model.mlir" --nn-verify -o "$p"
  case_ "$want" -- "$ST" "$F/text.txt" -o "$p"
  case_ "$want|--save" -- "${TR_OK[@]}" --save "$p"
  case_ "$want|--dump" -- "${TR_OK[@]}" --dump "$p"
done
case_ "config.json" -- "$SI" "$F/config.json" --batch 1 --seq 8 -o "$F/config.json"
case_ "text.txt" -- "$ST" "$F/text.txt" -o "$F/text.txt"
case_ "model.mlir" -- "$SO" "$F/model.mlir" --nn-verify -o "$F/model.mlir"
case_ "config.json" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$F/config.json"
case_ "data.tokens|--data" -- "${TR_OK[@]}" --save "$F/data.tokens"
case_ "data.tokens|--data" -- "${TR_OK[@]}" --dump "$F/data.tokens"
case_ "model.safetensors|--load" -- "$TR" --data "$F/data.tokens" --steps 3 --lr 1e-3 --max-grad-norm 1 --load "$F/ck/model.safetensors" --dump "$F/ck/model.safetensors"

# Hostile configs, plans and IR.
for c in "$F"/cfg-*.json; do
  key=$(basename "$c" .json); key=${key#cfg-}
  case_ "${c##*/}" -- "$SI" "$c" --batch 1 --seq 8 -o "$O/m.mlir"
done
for c in rope-tiny init-huge eps-huge heads-odd; do
  case_ "cfg-$c.json" -- "$SC" "$F/cfg-$c.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
done
for e in "${PLAN_EXPECT[@]}"; do
  p=$F/${e%%|*}
  case_ "$e" -- "$SO" "$F/model.mlir" "--tp-plan=$p" --tp-size=2 -o "$O/o.mlir"
  case_ "$e" -- "$SC" "$F/config.json" "--tp-plan=$p" --tp-size=2 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
done
for n in 'qwen2" tp=2}, canonicalize, tp-plan{plan="qwen2' "madeup" "QWEN2" "qwen2 " "../qwen2" \
         "qwen2;rm" '$(id)' "qwen2}" "*"; do
  case_ "--tp-plan|$n" -- "$SO" "$F/model.mlir" "--tp-plan=$n" --tp-size=2 -o "$O/o.mlir"
  case_ "--tp-plan|$n" -- "$SC" "$F/config.json" "--tp-plan=$n" --tp-size=2 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
done
case_ "divide|divisible|3" -- "$SO" "$F/model.mlir" --tp-plan=qwen2 --tp-size=3 -o "$O/o.mlir"
case_ "divide|divisible|64" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=64 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
case_ "--dp-size|batch|3" -- "$SC" "$F/config.json" --tp-plan=qwen2 --tp-size=1 --dp-size=3 --batch 4 --seq 8 --emit=mlir -o "$O/c.mlir"
for ir in constant unregistered malformed truncated binary; do
  case_ "ir-$ir.mlir|made.up|arith.constant" -- "$SO" "$F/ir-$ir.mlir" --lower-to-runtime -o "$O/o.mlir"
done
case_ "arith.constant|ir-constant.mlir" -- "$SO" "$F/ir-constant.mlir" --nn-autodiff -o "$O/o.mlir"
case_ "nope|pipeline" -- "$SO" "$F/model.mlir" "--pass-pipeline=builtin.module(nope)"
case_ "pipeline|(" -- "$SO" "$F/model.mlir" "--pass-pipeline=builtin.module(("
case_ "max-grad-norm|abc" -- "$SO" "$F/model.mlir" "--nn-optimizer=max-grad-norm=abc"
case_ "lr|-1" -- "$SO" "$F/model.mlir" --nn-autodiff "--nn-optimizer=lr=-1"
case_ "betas|2" -- "$SO" "$F/model.mlir" --nn-autodiff "--nn-optimizer=betas=2,0.9"
case_ "backend|tpu" -- "$SO" "$F/model.mlir" "--lower-to-runtime=backend=tpu"
case_ "tp|-4" -- "$SO" "$F/model.mlir" "--tp-plan=plan=qwen2 tp=-4"

# Environment family (issue 39): OpenMP settings the kernels cannot run
# under. (Teams OpenMP shrinks are not refused but fixed: ctest's */omp_*.)
for v in 16K " 16 k " 64000B +16K; do
  case_ "OMP_STACKSIZE|128 KiB" -- env "OMP_STACKSIZE=$v" "${TR_OK[@]}"
done
case_ "GOMP_STACKSIZE|128 KiB" -- env GOMP_STACKSIZE=20 "${TR_OK[@]}"
case_ "GOMP_STACKSIZE|128 KiB" -- env OMP_STACKSIZE=abc GOMP_STACKSIZE=20 "${TR_OK[@]}"
case_ "ulimit -s|96 KiB" -- bash -c 'ulimit -s 96 && exec "$@"' _ "${TR_OK[@]}"

# Issue 39 items 5, 6 and 7 family: refused before step 1 (or before any
# compiling), naming the problem: outputs inside the --export folder, a
# removed working directory, --eval-batches past the eval file (it never
# finished), a config deeper than a compiled step takes (compiled for
# minutes), a tokenizer of more ids than the model. (PMI_SIZE=abc concerns
# the serial runtime of shard-compiled one-rank programs, which
# train_tiny_dp1_tp1 does not link: test/shard-compile/serial.test.)
# Its files lie outside $F (whose snapshot is already taken).
I39=$T/issue39 && mkdir -p "$I39/tok700" || die "mkdir $I39"
sed 's/"num_hidden_layers": 2,/"num_hidden_layers": 100000,/' "$F/config.json" >"$I39/deep.json"
grep -q '"num_hidden_layers": 100000,' "$I39/deep.json" || die "deep config"
cp "$F/config.json" "$I39/tok700/config.json" || die "tok700 config"
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "z": 699}}}\n' >"$I39/tok700/tokenizer.json"
case_ "lies inside the --export folder" -- "${TR_OK[@]}" --export "$O/e" --metrics "$O/e/m.jsonl"
case_ "lies inside the --export folder" -- "${TR_OK[@]}" --export "$O/e" --save "$O/e/model.safetensors"
ln -s "$O/e/m.jsonl" "$I39/mlink" || die "dangling metrics link" # (fopen creates its target)
case_ "lies inside the --export folder" -- "${TR_OK[@]}" --export "$O/e" --metrics "$I39/mlink"
case_ "working directory" -- bash -c 'mkdir -p "$1/gone" && cd "$1/gone" && rmdir "$1/gone" && shift && exec "$@"' _ "$O" "${TR_OK[@]}" --save ck.safetensors
case_ "--eval-batches 1000000000" -- "${TR_OK[@]}" --eval-data "$F/data.tokens" --eval-batches 1000000000
case_ "num_hidden_layers 100000" -- "$SC" "$I39/deep.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 --emit=mlir -o "$O/c.mlir"
case_ "token id 699" -- "$SC" "$I39/tok700/config.json" --tp-plan=qwen2 --tp-size=1 --batch 1 --seq 8 -o "$O/train"

# Concurrency family (issue 39, items 2 and 3): a --save path and an
# --export folder whose lock another job holds (a background flock(1) on
# "<path>.lock"), and a checkpoint whose optimizer file is another run's
# at the same step (copied under the name the weights give).
mkdir -p "$F/held" "$F/ck2" "$F/mix"
: >"$F/held/model.safetensors.lock" && : >"$F/held/hf.lock"
flock -n "$F/held/model.safetensors.lock" sleep 100000 </dev/null >/dev/null 2>&1 &
HOLDERS=($!)
flock -n "$F/held/hf.lock" sleep 100000 </dev/null >/dev/null 2>&1 &
HOLDERS+=($!)
trap 'kill "${HOLDERS[@]}" 2>/dev/null; rm -rf "$T"' EXIT
ASAN_OPTIONS=detect_leaks=0 "$TR" --data "$F/data.tokens" --steps 2 --lr 1e-3 --max-grad-norm 1 \
  --seed 2 --save "$F/ck2/model.safetensors" >/dev/null || die "train --save (second run)"
cp "$F/ck/model.safetensors" "$F/mix/" &&
  cp "$F/ck2/model.safetensors.optim-00000002-0" "$F/mix/model.safetensors.optim-00000002-0" \
  || die "mixed checkpoint"
# A lock file that is a link to an input, or someone's file of that name:
# neither may be rewritten.
mkdir -p "$F/lk" && ln -s "$F/config.json" "$F/lk/model.safetensors.lock" &&
  echo "precious" >"$F/lk/hf.lock" || die "lock links"
sleep 0.2 # the holders have their locks
BEFORE=$(snapshot)
case_ "belongs to another job" -- "${TR_OK[@]}" --save "$F/held/model.safetensors"
case_ "belongs to another job" -- "${TR_OK[@]}" --save "$F/held/model.safetensors" --keep-last 2
case_ "belongs to another job" -- "${TR_OK[@]}" --export "$F/held/hf"
case_ "symbolic link|model.safetensors.lock" -- "${TR_OK[@]}" --save "$F/lk/model.safetensors"
case_ "not a lock file|hf.lock" -- "${TR_OK[@]}" --export "$F/lk/hf"
case_ "not one checkpoint" -- "$TR" --data "$F/data.tokens" --steps 3 --lr 1e-3 --max-grad-norm 1 --load "$F/mix/model.safetensors"

# Issue 39 items 3 and 4 (resume-with-other-flags family, MPMD family).
# The step-2 checkpoint $F/ck records 'constant lr=0.001 warmup=0': a resume
# giving other schedule values is refused naming both, unless
# --override-lr-schedule. MPMD launches (two ranks of the tp2 / dp2 test
# programs) with per-rank flags or other programs are refused by the ranks'
# agreement before step 1.
CK39=$F/ck/model.safetensors
TR39=("$TR" --data "$F/data.tokens" --steps 4 --max-grad-norm 1 --load "$CK39")
case_ "--lr 0.001" -- "${TR39[@]}" --lr 5e-1
case_ "--lr-schedule constant" -- "${TR39[@]}" --lr-schedule cosine
case_ "--warmup-steps 0" -- "${TR39[@]}" --warmup-steps 3
case_ "--lr F is required with --override-lr-schedule" -- "${TR39[@]}" --override-lr-schedule
case_ "--override-lr-schedule needs --load" -- "${TR_OK[@]}" --override-lr-schedule
MPI39=$(command -v mpiexec || true)
if [ -n "$MPI39" ]; then
  MP39=("$MPI39" --allow-run-as-root --oversubscribe -np 1)
  A39=(--data "$F/data.tokens" --steps 1 --lr 1e-3 --max-grad-norm 1 --threads 1)
  T2=$BIN/train_tiny_dp1_tp2
  case_ "on --lr: 0.001 on rank 0, 0.002 on rank 1" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$T2" "${A39[@]/1e-3/2e-3}"
  case_ "on --seed" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$T2" "${A39[@]}" --seed 3
  G39=("${A39[@]}"); G39[7]=2
  case_ "on --max-grad-norm" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$T2" "${G39[@]}"
  case_ "on command line" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$T2" --help
  case_ "--lr: 'abc' is not a number" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$T2" "${A39[@]:0:5}" abc "${A39[@]:6}"
  case_ "on program mesh" -- "${MP39[@]}" "$T2" "${A39[@]}" : -np 1 "$BIN/train_tiny_dp2_tp1" "${A39[@]}"
fi

#===------------------------------------------------------------------===#
# Run
#===------------------------------------------------------------------===#
LIMIT=30 # seconds: the slowest clean refusal (shard-compile under ASan) takes ~3
total=${#CMDS[@]} clean=0 exit0=0 signals=0 hangs=0 silent=0 changed=0 leftover=0 failed=()
for i in "${!CMDS[@]}"; do
  rm -rf "${O:?}"/* 2>/dev/null
  # The driver's MPI library keeps allocations to the end: no leak report
  # for it under ASan (the tools keep leak checking).
  leaks=""
  # (any driver program: TR, and the MPMD cases' train_tiny_* under mpiexec)
  [[ ${CMDS[$i]} == *"$(printf '%q' "$TR") "* || ${CMDS[$i]} == *"$(printf '%q' "$BIN")/train_"* ]] &&
    leaks="env ASAN_OPTIONS=detect_leaks=0"
  eval "$leaks timeout -s KILL $LIMIT ${CMDS[$i]}" </dev/null >"$T/stdout" 2>"$T/stderr"
  rc=$?
  msg=$(cat "$T/stderr" "$T/stdout")
  # The expected strings must be in the message itself, not in the usage
  # text some tools print after it (which names every flag).
  said=$(grep -v '^ \|^usage' <<<"$msg")
  why=""
  if ((rc == 0)); then
    why="exit 0"; ((exit0++))
  elif ((rc == 137)); then
    why="hang (killed after $LIMIT s)"; ((hangs++))
  elif ((rc > 128)) || grep -qE "Sanitizer|runtime error:|Segmentation|core dumped" <<<"$msg"; then
    why="signal or sanitizer report (exit $rc)"; ((signals++))
  else
    found=0
    IFS='|' read -r -a alts <<<"${EXPECTS[$i]}"
    for a in "${alts[@]}"; do
      [ -n "$a" ] && grep -qF -e "$a" <<<"$said" && { found=1; break; }
    done
    ((found)) || { why="message names none of: ${EXPECTS[$i]}"; ((silent++)); }
  fi
  left=$(cd "$O" && find . -mindepth 1 | head -3 | tr '\n' ' ')
  if [ -n "$left" ] && ((rc != 0)); then
    why="${why:+$why; }the refused command left output: $left"; ((leftover++))
  fi
  AFTER=$(snapshot)
  if [ "$AFTER" != "$BEFORE" ]; then
    why="${why:+$why; }an input changed: $(diff <(echo "$BEFORE") <(echo "$AFTER") | grep '^[<>]' | head -3 | tr '\n' ' ')"
    ((changed++))
    BEFORE=$AFTER
  fi
  [ -n "${BATTERY_LOG:-}" ] &&
    printf 'case %d (exit %d): %s\n    %s\n' "$i" "$rc" "${CMDS[$i]:0:300}" \
      "$(grep -v '^ \|^usage' <<<"$msg" | head -2 | cut -c1-300 | tr '\n' ' ')" >>"$BATTERY_LOG"
  if [ -n "$why" ]; then
    failed+=("case $i: $why
    command: ${CMDS[$i]:0:400}
    output:  $(head -c 400 <<<"$msg" | tr '\n' ' ')")
  else
    ((clean++))
  fi
done
for f in "${failed[@]}"; do echo "FAIL $f"; done
echo "battery: $total cases: $clean refused cleanly; $exit0 exited 0; $signals crashed (signal or" \
     "sanitizer); $hangs hung; $silent without a message naming the problem; $changed changed an" \
     "input; $leftover left output; device cases $([ "$DEVICES" = 1 ] && echo run || echo skipped: not root)"
((${#failed[@]} == 0))
