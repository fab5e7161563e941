#!/usr/bin/env bash
# Builds the GPU bundle: one folder, at most 64 MiB, to carry to a machine
# with an NVIDIA GPU but no compiler, MLIR, MPI, OpenBLAS or package
# registry (the device tool's machine). It holds, gzip'ed in payload.tar.gz:
#   bin/       the GPU tests (kernels_test, ops_test, cp_layout_test,
#              mamba2_test),
#              cuda_devices, gemm_peak, st_compare
#   programs/  training executables compiled here for --backend=cuda, tp 1:
#              the five tiny parity models (NemotronH's among them; two
#              also with --cpu-offload)
#              and the benchmark shapes (Qwen2.5-0.5B 8 x 2048, Llama-3.2-1B
#              8 x 2048 and 4 x 4096, the last also with --cpu-offload)
#   ref/       the cpu backend's logs of the parity runs, made here
#   data/      the parity runs' token file; configs/ for PyTorch eager
#   lib/       every shared library they need that a bare CUDA image lacks
#              (not the driver, the CUDA runtime, cuBLAS(Lt), cuDNN or NCCL,
#              which the run script finds in the image's PyTorch install)
# and run.sh (bench/gpu_bundle_run.sh), which unpacks and runs it all. Every
# executable is a program of one rank on the serial runtime: no MPI needed.
# Checks here, under the run script's minimal environment, that `ldd` finds
# every library but those five, and that the run script says "no CUDA
# device" on this machine when it has none.
#
# usage: bench/gpu_bundle.sh [OUT_DIR [BUILD_DIR]]   (default: build/gpu-bundle;
#        with BUILD_DIR, that CUDA build is used as it is, not rebuilt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/gpu-bundle}
models=$root/examples/models
if [ -n "${2:-}" ]; then
  bin=$2/bin
else
  "$root/scripts/build.sh" build -DSHARD_CUDA=ON >/dev/null
  bin=$root/build/bin
fi
[ -x "$bin/cuda_devices" ] || { echo "gpu_bundle: $bin has no CUDA build (cuda_devices)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,programs,ref,data,configs,lib}

for exe in kernels_test ops_test cp_layout_test mamba2_test cuda_devices gemm_peak st_compare; do
  strip -o "$stage/bin/$exe" "$bin/$exe"
done

# compile NAME CONFIG PLAN BATCH SEQ [FLAGS...]: programs/NAME, stripped.
compile() {
  local name=$1 config=$2 plan=$3 batch=$4 seq=$5; shift 5
  "$bin/shard-compile" "$config" --tp-plan="$plan" --tp-size=1 --batch "$batch" --seq "$seq" \
    "$@" -o "$stage/$name" >"$stage/compile.log" 2>&1 \
    || { cat "$stage/compile.log"; echo "gpu_bundle: shard-compile $name failed" >&2; exit 1; }
}

# Parity: the same step on both backends from the same seed and tokens; the
# cpu runs happen here, their logs travel (bench/gpu_bundle_run.sh compares).
"$bin/shard-tokens" --windows "$root/examples/data/shard-tales.txt" -o "$stage/data/tales.tokens" >/dev/null
TRAIN=(--data "$stage/data/tales.tokens" --lr 1e-2 --max-grad-norm 1.0 --seed 11)
for arch in qwen2 qwen3 llama gemma3 nemotron_h; do
  config=$root/test/e2e/configs/tiny-$arch.json
  compile "cpu-$arch" "$config" "$arch" 4 32
  "$stage/cpu-$arch" "${TRAIN[@]}" --steps 5 >"$stage/ref/$arch.cpu.log" 2>&1 \
    || { cat "$stage/ref/$arch.cpu.log"; echo "gpu_bundle: cpu run of $arch failed" >&2; exit 1; }
  rm "$stage/cpu-$arch"
  compile "programs/$arch" "$config" "$arch" 4 32 --backend=cuda
done
# --cpu-offload: the same steps bit for bit as programs/ARCH (run.sh).
for arch in qwen2 gemma3; do
  compile "programs/offload-$arch" "$root/test/e2e/configs/tiny-$arch.json" "$arch" 4 32 \
    --backend=cuda --cpu-offload
done

# Benchmarks, with the model facts MFU needs (as bench/gpu.sh computes them):
# name batch seq N layers heads head_dim vocab, N the parameters that multiply.
: >"$stage/programs/bench.txt"
bench() { # NAME CONFIG PLAN BATCH SEQ [SHARD-COMPILE FLAGS...]
  local name=$1 config=$2 plan=$3 batch=$4 seq=$5 summary
  shift 5
  compile "programs/$name" "$config" "$plan" "$batch" "$seq" --backend=cuda "$@"
  cp "$config" "$stage/configs/${config##*/}"
  summary=$("$bin/shard-import" "$config" --batch 1 --seq 16 --summary)
  awk -v name="$name" -v b="$batch" -v s="$seq" -v cfg="${config##*/}" '
    /^parameters:/ { gsub(",", "", $2); params = $2 }
    /^hidden:/ { gsub(",", "", $2); gsub(",", "", $NF); hidden = $2; vocab = $NF }
    /^layers:/ { layers = $2 }
    /^heads:/ { heads = $2; hd = $NF }
    /^tied:/ { tied = 1 }
    END { n = tied ? params : params - vocab * hidden
          print name, b, s, n, layers, heads, hd, vocab, cfg }' <<<"$summary" \
    >>"$stage/programs/bench.txt"
}
bench qwen2.5-0.5b-8x2048 "$models/qwen2.5-0.5b.json" qwen2 8 2048
bench llama-3.2-1b-8x2048 "$models/llama-3.2-1b.json" llama 8 2048
bench llama-3.2-1b-4x4096 "$models/llama-3.2-1b.json" llama 4 4096
# What --cpu-offload costs a step (run.sh compares it with the row above).
bench llama-3.2-1b-4x4096-offload "$models/llama-3.2-1b.json" llama 4 4096 --cpu-offload
for p in "$stage"/programs/*; do
  [ -x "$p" ] && [ ! -d "$p" ] && strip "$p"
done
cp "$root/bench/gpu_torch.py" "$root/bench/random_tokens.py" "$stage/configs/"

# Libraries: what ldd resolves here, minus the C library and the five the
# device's PyTorch carries (and the driver).
provided='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so'
for exe in "$stage"/bin/* "$stage"/programs/*; do
  [ -x "$exe" ] || continue
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  grep -qE "$provided" <<<"$soname" || cp -L "$path" "$stage/lib/$soname"
done

# The ldd check, in the run script's environment: only the provided ones
# may be missing here (this machine's CUDA is found through the toolkit's
# rpath; on the device through PyTorch).
missing=$(for exe in "$stage"/bin/* "$stage"/programs/*; do
  [ -x "$exe" ] || continue
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$stage/lib" ldd "$exe" |
    awk -v e="${exe##*/}" '/not found/ { print e ": " $1 }'
done | grep -vE ": $provided" || true)
[ -z "$missing" ] || { echo "gpu_bundle: libraries not in the bundle:"; echo "$missing"; exit 1; } >&2
for lib in "$stage"/lib/*; do
  env -i LD_LIBRARY_PATH="$stage/lib" ldd "$lib" | grep -q "not found" &&
    { echo "gpu_bundle: $lib needs a library not in the bundle" >&2; exit 1; }
done

rm -rf "$out" && mkdir -p "$out"
tar -C "$stage" -czf "$out/payload.tar.gz" bin programs ref data configs lib
cp "$root/bench/gpu_bundle_run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
size=$(du -sb "$out" | cut -f1)
((size <= 64 << 20)) || { echo "gpu_bundle: $out is $size bytes, over 64 MiB" >&2; exit 1; }
echo "gpu_bundle: $out: $((size >> 20)) MiB ($(du -sb "$stage" | cut -f1 | awk '{printf "%d", $1 / 2^20}') MiB unpacked):" \
     "$(ls "$stage/bin" "$stage/programs" | grep -vc ':$\|^$\|bench.txt') executables, $(ls "$stage/lib" | wc -l) libraries"
echo "gpu_bundle: copy $out/ (payload.tar.gz, run.sh) to the GPU machine and run: bash run.sh"
echo "gpu_bundle: here:"
log=$(bash "$out/run.sh" 2>&1) || { echo "$log"; echo "gpu_bundle: run.sh failed" >&2; exit 1; }
echo "$log"
# Without a device the run script must say so (and has run nothing).
if [ "$("$bin/cuda_devices" 2>/dev/null || echo 0)" = 0 ] && ! grep -q "^no CUDA device" <<<"$log"; then
  echo "gpu_bundle: run.sh did not say 'no CUDA device' on a machine without one" >&2
  exit 1
fi
