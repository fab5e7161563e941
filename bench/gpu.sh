#!/usr/bin/env bash
# The GPU benchmark (issue 7): builds, runs the GPU tests (ctest -L gpu),
# then times training steps of Qwen2.5-0.5B and Llama-3.2-1B compiled with
# --backend=cuda on one GPU (random tokens) and prints, per model and shape:
#   tokens/s (median of the steps after two warm-up steps),
#   MFU = (6 N + 6 L H hd S) tokens/s / the bf16 GEMM peak measured in this
#         run by bench/gemm_peak (N: the parameters that multiply, i.e.
#         without an untied input embedding; the second term is causal
#         attention's QK^T and PV, forward and backward),
#   and PyTorch eager's tokens/s for the same step on the same GPU
#   (bench/gpu_torch.py: transformers, bf16 autocast, fused AdamW) with the
#   ratio ours / eager, when torch with CUDA is installed.
# Goals (reported, not asserted): MFU >= 45% on Llama-3.2-1B at seq 4096 and
# >= 1.3x eager's tokens/s. Sized to finish within 8 minutes on an H200.
# Without a CUDA device it says so and exits 0 after the build.
#
# usage: bench/gpu.sh [BUILD_DIR]   env: STEPS (default 8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
steps=${STEPS:-8}
# The real Hugging Face configs, copied into examples/models.
models=$root/examples/models
"$root/scripts/build.sh" "$dir" -DSHARD_CUDA=ON >/dev/null
bin=$root/$dir/bin
devices=$("$bin/cuda_devices")
if [ "$devices" -eq 0 ]; then
  echo "SKIP: no CUDA device: built every kernel for sm_90, ran nothing on a GPU"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
echo "== GPU tests =="
(cd "$root/$dir" && ctest -L gpu --output-on-failure) || echo "GPU TESTS FAILED (benchmarks still run)"

peak=$("$bin/gemm_peak" | awk '/^TFLOPS/ {print $2}') || true
[ -n "$peak" ] || { echo "gemm_peak failed: no peak, no MFU"; exit 1; }
echo "bf16 GEMM peak (cuBLASLt 8192^3, this run): $peak TFLOP/s"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# random_tokens VOCAB FILE: 2M random ids (bench/random_tokens.py).
random_tokens() { python3 "$root/bench/random_tokens.py" "$1" "$2"; }

# bench NAME CONFIG PLAN BATCH SEQ
bench() {
  local name=$1 config=$2 plan=$3 batch=$4 seq=$5
  local summary vocab hidden layers heads hd params tied n
  summary=$("$bin/shard-import" "$config" --batch 1 --seq 16 --summary)
  vocab=$(awk '/^hidden:/ {gsub(",", "", $NF); print $NF}' <<<"$summary")
  layers=$(awk '/^layers:/ {print $2}' <<<"$summary")
  heads=$(awk '/^heads:/ {print $2}' <<<"$summary")
  hd=$(awk '/^heads:/ {print $NF}' <<<"$summary")
  params=$(awk '/^parameters:/ {gsub(",", "", $2); print $2}' <<<"$summary")
  hidden=$(awk '/^hidden:/ {gsub(",", "", $2); print $2}' <<<"$summary")
  tied=$(grep -c '^tied:' <<<"$summary" || true)
  n=$((tied ? params : params - vocab * hidden)) # an untied input table does not multiply
  [ -f "$work/$vocab.tok" ] || random_tokens "$vocab" "$work/$vocab.tok"
  if ! "$bin/shard-compile" "$config" --tp-plan="$plan" --tp-size=1 --batch "$batch" \
       --seq "$seq" --backend=cuda -o "$work/$name" >"$work/$name.compile.log" 2>&1; then
    cat "$work/$name.compile.log"; echo "$name: shard-compile FAILED"; return 0
  fi
  local ours torch ratio mfu
  if ! "$work/$name" --data "$work/$vocab.tok" --steps "$steps" --lr 1e-4 --max-grad-norm 1.0 \
       >"$work/$name.log" 2>&1; then
    tail -5 "$work/$name.log"; echo "$name batch $batch x seq $seq: training FAILED"; return 0
  fi
  grep -m4 'cuDNN' "$work/$name.log" || true # which attention ran
  ours=$(awk 'function num(x, m) { m = x ~ /k$/ ? 1e3 : x ~ /M$/ ? 1e6 : x ~ /G$/ ? 1e9 : 1; sub(/[kMG]$/, "", x); return x * m } /^step / && ++k > 2 { for (i = 2; i <= NF; ++i) if ($i == "tok/s") print num($(i - 1)) }' \
           "$work/$name.log" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  mfu=$(awk -v t="$ours" -v n="$n" -v l="$layers" -v h="$heads" -v d="$hd" -v s="$seq" -v p="$peak" \
        'BEGIN { printf "%.1f", 100 * t * (6 * n + 6 * l * h * d * s) / (p * 1e12) }')
  if torch=$(python3 "$root/bench/gpu_torch.py" "$config" "$batch" "$seq" "$steps" 2>/dev/null); then
    torch=${torch%% *} # tokens/s (then the peak GiB)
    ratio=$(awk -v a="$ours" -v b="$torch" 'BEGIN { printf "%.2fx", a / b }')
  else
    torch="n/a (torch+transformers with CUDA not installed)" ratio="n/a"
  fi
  printf "%-14s batch %d x seq %-5d  ours %8.0f tok/s  MFU %5s%%  eager %s tok/s  ratio %s\n" \
    "$name" "$batch" "$seq" "$ours" "$mfu" "$torch" "$ratio"
}

echo "== training step, one GPU, bf16 compute / fp32 master weights =="
bench qwen2.5-0.5b "$models/qwen2.5-0.5b.json" qwen2 8 2048
bench llama-3.2-1b "$models/llama-3.2-1b.json" llama 8 2048
bench llama-3.2-1b "$models/llama-3.2-1b.json" llama 4 4096
