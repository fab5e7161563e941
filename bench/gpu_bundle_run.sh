#!/usr/bin/env bash
# The GPU bundle's run script (bench/gpu_bundle.sh puts it beside
# payload.tar.gz as run.sh). Needs no compiler, MLIR, MPI or package
# manager: bash, tar and the image's PyTorch (for the CUDA runtime, cuBLAS,
# cuDNN and NCCL libraries, and for the eager baseline). Unpacks, then:
#   1. the GPU tests: kernels_test (our kernels against the CPU's on
#      bf16-rounded inputs), ops_test (ops and the NCCL collectives at world
#      size 1), cp_layout_test (the cp attention's token moves), mamba2_test
#      (the Mamba2 mixer's ops against the cpu's), and the 5-step training
#      parity of the five tiny models (NemotronH's among them)
#      against the cpu logs made when the bundle was built, plus a resume,
#      and --cpu-offload against the on-device AdamW (bit-identical);
#   2. the bf16 GEMM peak and a device-to-device copy (gemm_peak);
#   3. the benchmark programs: tokens/s (median after 2 warm-up steps), MFU
#      against the measured peak (6 N + 6 L H hd S FLOPs per token, as
#      bench/gpu.sh), the same step in PyTorch eager (bench/gpu_torch.py),
#      the ratio, and memory (our static device arena; torch's peak); an
#      -offload row (--cpu-offload) gives its ratio to the same program
#      without offload instead of eager.
# Prints one table. Without a CUDA device it says so and exits 0.
# usage: run.sh [STEPS]   (default 8)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
steps=${1:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xzf "$here/payload.tar.gz" || { echo "run.sh: cannot unpack the payload"; exit 1; }

# The CUDA libraries of the image's PyTorch (torch/lib and the nvidia-*
# wheels), then the system's, after the bundle's own.
libs=$work/lib
if torch_libs=$(python3 - 2>/dev/null <<'PY'
import glob, os, torch
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
site = os.path.dirname(os.path.dirname(torch.__file__))
for pattern in ("*/lib", "*/*/lib"):  # nvidia/cudnn/lib, nvidia/cu13/lib
    dirs += sorted(glob.glob(os.path.join(site, "nvidia", pattern)))
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
); then
  libs=$libs:$torch_libs
fi
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "$work"

devices=$(bin/cuda_devices 2>&1) || devices=0
if ! [ "$devices" -gt 0 ] 2>/dev/null; then
  echo "no CUDA device (cuda_devices: $devices): the bundle unpacked; nothing was run on a GPU"
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
status=0

echo "== GPU tests =="
for t in kernels_test ops_test cp_layout_test mamba2_test; do
  if bin/$t >"$t.log" 2>&1; then echo "PASS $t"; else tail -20 "$t.log"; echo "FAIL $t"; status=1; fi
done
steps_of() { awk '/^step /{split($2, k, "/"); print k[1], $5, $8}' "$1"; }
max_rel() { # CANDIDATE REFERENCE (step lines): "<n> <max rel loss> <max rel norm>"
  paste -d' ' <(steps_of "$1") <(steps_of "$2") | awk '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; s = (y < 0 ? -y : y); return s > 0 ? d / s : d }
    NF != 6 || $1 != $4 { bad = 1; next }
    { n++; a = rel($2, $5); b = rel($3, $6); if (a > ml) ml = a; if (b > mg) mg = b }
    END { if (bad || n == 0) exit 1; printf "%d %.3e %.3e\n", n, ml, mg }'
}
TRAIN=(--data data/tales.tokens --lr 1e-2 --max-grad-norm 1.0 --seed 11)
for arch in qwen2 qwen3 llama gemma3 nemotron_h; do
  if ! programs/$arch "${TRAIN[@]}" --steps 5 >"$arch.log" 2>&1; then
    tail -5 "$arch.log"; echo "FAIL parity $arch: the cuda run failed"; status=1; continue
  fi
  read -r n loss norm < <(max_rel "$arch.log" "ref/$arch.cpu.log") || n=""
  ok=$(awk -v l="${loss:-1}" -v g="${norm:-1}" 'BEGIN { print (l <= 2e-2 && g <= 5e-2) ? "PASS" : "FAIL" }')
  [ -n "$n" ] || ok=FAIL
  echo "$ok parity $arch: ${n:-0} steps, max rel loss ${loss:-?} (tol 2e-2), grad norm ${norm:-?} (tol 5e-2)"
  [ "$ok" = PASS ] || status=1
  programs/$arch "${TRAIN[@]}" --steps 3 --save "$arch.ckpt" >"$arch.r1.log" 2>&1 &&
    programs/$arch "${TRAIN[@]}" --steps 5 --load "$arch.ckpt" >"$arch.r2.log" 2>&1 &&
    read -r n loss norm < <(max_rel "$arch.r2.log" <(grep -E '^step [45]/' "$arch.log")) &&
    awk -v l="$loss" -v g="$norm" 'BEGIN { exit !(l <= 1e-6 && g <= 1e-6) }' &&
    echo "PASS resume $arch: steps 4-5 after --load within 1e-6" ||
    { echo "FAIL resume $arch"; tail -3 "$arch.r2.log"; status=1; }
done
# --cpu-offload (AdamW on the host): the cuda runs' steps, weights and
# moments bit for bit, both sides on our attention kernels (cuDNN's SDPA
# backward need not repeat its bytes from run to run).
for arch in qwen2 gemma3; do
  if SHARD_CUDA_ATTENTION=kernel programs/offload-$arch "${TRAIN[@]}" --steps 5 \
       --save "off-$arch.st" >"off-$arch.log" 2>&1 &&
     SHARD_CUDA_ATTENTION=kernel programs/$arch "${TRAIN[@]}" --steps 5 \
       --save "on-$arch.st" >"on-$arch.log" 2>&1 &&
     diff <(steps_of "off-$arch.log") <(steps_of "on-$arch.log") >/dev/null &&
     bin/st_compare --rtol 0 "off-$arch.st" "on-$arch.st" >"off-$arch.cmp" 2>&1 &&
     bin/st_compare --rtol 0 "off-$arch.st.optim-00000005-0" "on-$arch.st.optim-00000005-0" \
       >>"off-$arch.cmp" 2>&1; then
    echo "PASS offload $arch: 5 steps, weights and moments bit-identical to the on-device AdamW"
  else
    tail -5 "off-$arch.log" "off-$arch.cmp" 2>/dev/null; echo "FAIL offload $arch"; status=1
  fi
done

echo "== peak =="
bin/gemm_peak >peak.log 2>&1 || { cat peak.log; echo "FAIL gemm_peak"; exit 1; }
peak=$(awk '/^TFLOPS/ {print $2}' peak.log) copy=$(awk '/^COPY_GBPS/ {print $2}' peak.log)
echo "bf16 GEMM peak (cuBLASLt 8192^3): $peak TFLOP/s; device-to-device copy: $copy GB/s (read + write)"

# random_tokens VOCAB FILE: 2M random ids (bench/random_tokens.py).
random_tokens() { python3 configs/random_tokens.py "$1" "$2"; }

echo "== training step, one GPU, bf16 compute / fp32 master weights =="
declare -A rate # tok/s by program, for the offload rows' ratio
printf "%-28s %10s %7s %12s %7s %13s %11s\n" model "tok/s" MFU "eager tok/s" ratio "our arena GiB" "eager GiB"
while read -r name batch seq n layers heads hd vocab config; do
  [ -f "$vocab.tok" ] || random_tokens "$vocab" "$vocab.tok"
  if ! programs/$name --data "$vocab.tok" --steps "$steps" --lr 1e-4 --max-grad-norm 1.0 >"$name.log" 2>&1; then
    tail -5 "$name.log"; echo "FAIL $name: training failed"; status=1; continue
  fi
  ours=$(awk 'function num(x, m) { m = x ~ /k$/ ? 1e3 : x ~ /M$/ ? 1e6 : x ~ /G$/ ? 1e9 : 1; sub(/[kMG]$/, "", x); return x * m } /^step / && ++k > 2 { for (i = 2; i <= NF; ++i) if ($i == "tok/s") print num($(i - 1)) }' \
           "$name.log" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  arena=$(awk '/arena/ { for (i = 1; i < NF; ++i) if ($(i + 1) == "MiB") printf "%.1f", $i / 1024 }' "$name.log" | head -1)
  mfu=$(awk -v t="$ours" -v n="$n" -v l="$layers" -v h="$heads" -v d="$hd" -v s="$seq" -v p="$peak" \
        'BEGIN { printf "%.1f%%", 100 * t * (6 * n + 6 * l * h * d * s) / (p * 1e12) }')
  rate[$name]=$ours
  if [[ $name == *-offload ]]; then # against the same program without offload
    base=${name%-offload}
    printf "%-28s %10.0f %7s %12s %7s %13s %11s\n" "$name" "$ours" "$mfu" "(no offload)" \
      "$(awk -v a="$ours" -v b="${rate[$base]:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')" \
      "${arena:-?}" "-"
    continue
  fi
  if eager=$(python3 configs/gpu_torch.py "configs/$config" "$batch" "$seq" "$steps" 2>eager.err); then
    eager_rate=${eager%% *} eager_mem=${eager##* }
    ratio=$(awk -v a="$ours" -v b="$eager_rate" 'BEGIN { printf "%.2fx", a / b }')
  else
    eager_rate=n/a eager_mem=n/a ratio=n/a
  fi
  printf "%-28s %10.0f %7s %12s %7s %13s %11s\n" "$name" "$ours" "$mfu" "$eager_rate" "$ratio" \
    "${arena:-?}" "$eager_mem"
done <programs/bench.txt
exit $status
