#!/usr/bin/env bash
# Tokenizer throughput on English text: shard-tokens --tokenizer (one core)
# beside the Hugging Face `tokenizers` library on the same text and file
# (when it is importable; not a dependency of the project), and whether the
# ids agree. The text is the bundled shard-tales.txt repeated to about
# 10 MB; the tokenizers are the test fixtures (test/tokenizers) and any
# tokenizer.json given. The library runs on one thread
# (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1), both as one encode of
# the whole text and as encode_batch over its paragraphs. Nothing asserted.
#
#   bench/tokenizer.sh [BUILD_DIR] [tokenizer.json ...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq 400); do cat "$here/examples/data/shard-tales.txt"; done > "$work/text.txt"
files=("$here"/test/tokenizers/*/tokenizer.json "$@")
have_lib=0
python3 -c 'import tokenizers' 2>/dev/null && have_lib=1
printf '%-28s %10s %14s %14s %8s %s\n' tokenizer "ours MB/s" "library MB/s" "lib batch MB/s" ratio ids
for tj in "${files[@]}"; do
  name=$(basename "$(dirname "$tj")")
  line=$("$build/bin/shard-tokens" --windows --tokenizer "$tj" --no-bos --no-eos "$work/text.txt" -o "$work/ours.tok")
  ours=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) MB\/s).*/\1/p')
  if ((have_lib)); then
    read -r lib batch same < <(TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 python3 - "$tj" "$work/text.txt" "$work/ours.tok" <<'PY'
import struct, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
size = len(text.encode())
t0 = time.perf_counter(); ids = tok.encode(text, add_special_tokens=False).ids; t1 = time.perf_counter()
paragraphs = text.split("\n\n")
t2 = time.perf_counter(); tok.encode_batch(paragraphs, add_special_tokens=False); t3 = time.perf_counter()
raw = open(sys.argv[3], "rb").read()
width, count = struct.unpack_from("<H", raw, 10)[0], struct.unpack_from("<Q", raw, 16)[0]
ours = [int.from_bytes(raw[32 + i * width:32 + (i + 1) * width], "little") for i in range(count)]
print(f"{size / (t1 - t0) / 1e6:.1f} {size / (t3 - t2) / 1e6:.1f} {'same' if ours == ids else 'DIFFERENT'}")
PY
)
    ratio=$(awk -v a="$ours" -v b="$batch" 'BEGIN {printf "%.1f", a / b}')
  else
    lib=-; batch=-; ratio=-; same="(library not installed)"
  fi
  printf '%-28s %10s %14s %14s %8s %s\n' "$name" "$ours" "$lib" "$batch" "$ratio" "$same"
done
echo "ratio: ours / the library's encode_batch, one thread each"
