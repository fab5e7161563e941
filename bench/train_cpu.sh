#!/usr/bin/env bash
# CPU training throughput of a GEMM-bound small Llama (bench/train_cpu.json:
# hidden 512, 4 layers, vocabulary 256, batch 4 x seq 256) compiled by
# shard-compile: tokens/s and MFU = model FLOP/s / the sgemm FLOP/s of the
# runtime's GEMM library measured in the same run (kernels_bench), at tp 1
# (one process, no launcher) and tp 2 (2 MPI ranks); threads are the
# driver's default (cores / ranks on the node), nothing set by hand. The
# tp 1 run's --profile table follows, with the GEMMs' own rate in the step
# and the ceiling: the tokens/s of the profile's GEMM time alone, as if
# every other op took none. Model FLOPs per token:
# 6 x parameters + 12 x layers x seq x hidden (attention scores and values,
# forward and backward; causal halves it, not counted). If PyTorch and
# transformers are installed (not a dependency of the project), the same
# step in PyTorch eager runs too, in ROUNDS alternating pairs with ours at
# tp 1, and the median ratio is printed, with the ceiling's ratio to eager's
# median rate: the most faster non-GEMM kernels could reach. The bf16 rows
# follow: ours at tp 1 compiled with --param-dtype bf16 (bf16 weight copies
# and activations, fp32 masters, gradients and moments) beside ours in fp32
# and, with PyTorch, eager under torch.autocast("cpu", dtype=torch.bfloat16),
# alternating in the same rounds, each ratio's median. Nothing asserted.
#
#   bench/train_cpu.sh [BUILD_DIR] [STEPS] [ROUNDS]     defaults: build, 6, 3
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
steps=${2:-6}
rounds=${3:-3}
config=$here/bench/train_cpu.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
mpirun=(mpirun --allow-run-as-root --oversubscribe)

"$build/bin/shard-tokens" --windows "$here/examples/data/shard-tales.txt" -o "$work/data.tok" >/dev/null
bench_out=$("$build/bin/kernels_bench" --quick 2>/dev/null)
sgemm=$(echo "$bench_out" | awk '/^sgemm/ {for (i = 1; i <= NF; ++i) if ($i == "GFLOP/s") print $(i-1); exit}')
library=$(echo "$bench_out" | sed -n 's/^GEMM library: //p')
summary=$("$build/bin/shard-import" "$config" --batch 4 --seq 256 --summary)
params=$(echo "$summary" | awk '/^parameters:/ {gsub(",", "", $2); print $2}')
# Parameters the step multiplies by (the linear layers and the lm_head, or
# the embedding where it is tied): 6 FLOPs each per token, the GEMMs' share.
linear_params=$(echo "$summary" | awk '{gsub(",", "", $2)} $1 == "attention:" || $1 == "mlp:" {n += $2}
                $1 == "embedding:" {e = $2} $1 == "lm_head:" {h = $2} END {print n + (h > 0 ? h : e)}')
flops_per_token=$(awk -v p="$params" 'BEGIN {printf "%.0f", 6 * p + 12 * 4 * 256 * 512}')
printf 'host: %s, %d cores; torch: %s\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
  "$cores" "$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
printf 'model: %s parameters, %.1f MFLOP per token; GEMM: %s; sgemm: %s GFLOP/s\n' \
  "$params" "$(awk -v f="$flops_per_token" 'BEGIN {print f / 1e6}')" "$library" "$sgemm"
printf '%-6s %12s %12s %8s\n' mesh "tokens/s" "GFLOP/s" MFU

# tokens/s of a driver log: the steps after the first (warm-up), averaged.
tokens_per_s() {
  echo "$1" | awk 'function num(x, m) { m = x ~ /k$/ ? 1e3 : x ~ /M$/ ? 1e6 : x ~ /G$/ ? 1e9 : 1; sub(/[kMG]$/, "", x); return x * m } /^step/ && $2 !~ /^1\// {for (i = 2; i <= NF; ++i) if ($i == "tok/s") {s += num($(i-1)); n++}}
                   END {if (n) printf "%.0f", s / n; else print 0}'
}

ours=""
for tp in 1 2; do
  "$build/bin/shard-compile" "$config" --tp-plan=llama --tp-size=$tp --batch 4 --seq 256 \
    -o "$work/train$tp"
  launch=("${mpirun[@]}" -np $tp)
  ((tp > 1)) || launch=() # a program of one rank runs without a launcher
  log=$("${launch[@]}" "$work/train$tp" --data "$work/data.tok" --steps "$steps" --lr 1e-3 \
        --max-grad-norm 1 --profile 2>&1)
  [[ $tp != 1 ]] || profile=$(echo "$log" | grep -E '^(profile|train: [0-9]+ thread)')
  tps=$(tokens_per_s "$log")
  gf=$(awk -v t="$tps" -v f="$flops_per_token" 'BEGIN {printf "%.2f", t * f / 1e9}')
  mfu=$(awk -v g="$gf" -v s="$sgemm" 'BEGIN {printf "%.2f", g / s}')
  printf 'tp=%-3d %12s %12s %8s\n' "$tp" "$tps" "$gf" "$mfu"
  [[ -n $ours ]] || ours=$tps
done
echo "$profile"
# The ceiling of a tp 1 log: its --profile GEMM time alone per step, in
# tokens/s, as if every other op took none. A ratio to eager above the
# ceiling's needs fewer GEMM FLOPs or a faster GEMM, not faster other kernels.
gemm_ms() { echo "$1" | awk '$1 == "profile:" && $2 == "GEMM" {print $3}'; }
ceiling() { awk -v ms="$(gemm_ms "$1")" 'BEGIN {printf "%.0f", 4 * 256 * 1000 / ms}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ms=$(gemm_ms "$profile")
gemm_gf=$(awk -v p="$linear_params" -v ms="$ms" 'BEGIN {printf "%.1f", 6 * p * 4 * 256 / ms / 1e6}')
printf 'GEMM in the step: %s ms, %s GFLOP/s (%.2f of sgemm); ceiling (GEMM time alone): %s tokens/s\n' \
  "$ms" "$gemm_gf" "$(awk -v g="$gemm_gf" -v s="$sgemm" 'BEGIN {print g / s}')" "$(ceiling "$profile")"

if python3 -c 'import torch, transformers' 2>/dev/null; then
  # Ours at tp 1 and PyTorch in turn, ROUNDS times: on a shared machine the
  # speed of both drifts by 10-30% over minutes, so each round's pair gives
  # one ratio (and one ceiling ratio, from the same run's profile) and the
  # median of the rounds is the figure.
  ratios=() ceilings=()
  for ((round = 1; round <= rounds; ++round)); do
    if [[ $round != 1 ]]; then
      profile=$("$work/train1" --data "$work/data.tok" --steps "$steps" --lr 1e-3 \
                --max-grad-norm 1 --profile 2>&1)
      ours=$(tokens_per_s "$profile")
    fi
    torch_tps=$(python3 "$here/bench/train_torch.py" "$config" 4 256 "$steps" "$cores")
    ratio=$(awk -v a="$ours" -v b="$torch_tps" 'BEGIN {printf "%.2f", a / b}')
    top=$(awk -v a="$(ceiling "$profile")" -v b="$torch_tps" 'BEGIN {printf "%.2f", a / b}')
    ratios+=("$ratio") ceilings+=("$top")
    printf 'round %d: ours tp=1 %s tokens/s (ceiling %s), PyTorch eager (transformers, %d threads) %s: %s (ceiling %s)\n' \
      "$round" "$ours" "$(ceiling "$profile")" "$cores" "$torch_tps" "$ratio" "$top"
  done
  echo "ours at tp=1 / PyTorch eager: median $(median "${ratios[@]}") of $rounds rounds (${ratios[*]})"
  echo "ceiling / PyTorch eager: median $(median "${ceilings[@]}") (${ceilings[*]}): the most faster non-GEMM kernels could give"
else
  echo "PyTorch eager: not measured (pip install torch transformers to compare)"
fi

# bf16 (--param-dtype bf16) at tp 1: ours in bf16, ours in fp32 and, with
# PyTorch, eager under bf16 autocast, in turn in each round.
"$build/bin/shard-compile" "$config" --tp-plan=llama --tp-size=1 --batch 4 --seq 256 \
  --param-dtype bf16 -o "$work/train1_bf16"
torch_ok=$(python3 -c 'import torch, transformers' 2>/dev/null && echo 1 || echo 0)
to_f32=() to_torch=()
for ((round = 1; round <= rounds; ++round)); do
  run_tps() { tokens_per_s "$("$1" --data "$work/data.tok" --steps "$steps" --lr 1e-3 \
                             --max-grad-norm 1 2>&1)"; }
  b=$(run_tps "$work/train1_bf16")
  f=$(run_tps "$work/train1")
  to_f32+=("$(awk -v a="$b" -v c="$f" 'BEGIN {printf "%.2f", a / c}')")
  line=$(printf 'round %d: ours tp=1 bf16 %s tokens/s, fp32 %s' "$round" "$b" "$f")
  if [[ $torch_ok == 1 ]]; then
    t=$(python3 "$here/bench/train_torch.py" "$config" 4 256 "$steps" "$cores" bf16)
    to_torch+=("$(awk -v a="$b" -v c="$t" 'BEGIN {printf "%.2f", a / c}')")
    line+=$(printf ', PyTorch eager bf16 autocast (%d threads) %s' "$cores" "$t")
  fi
  echo "$line"
done
echo "ours bf16 / ours fp32 at tp=1: median $(median "${to_f32[@]}") of $rounds rounds (${to_f32[*]})"
[[ $torch_ok == 0 ]] ||
  echo "ours bf16 / PyTorch eager bf16 autocast: median $(median "${to_torch[@]}") (${to_torch[*]})"
