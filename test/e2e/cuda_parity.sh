#!/usr/bin/env bash
# The cuda backend against the cpu backend (issue 7, "Done when"): for each
# tiny config, compiles the same step for both backends (tp1), trains 5
# steps from the same seed on the same tokens, and checks every step's loss
# within LOSS_RTOL and grad norm within NORM_RTOL relative to the cpu run
# (bf16 compute against fp32: per-op relative rounding 2^-8 = 3.9e-3). The
# cuda run is a single process without mpirun (the driver's MPI starts as a
# singleton). Then a resume on the GPU: 3 steps + --save, --load and 2 more
# steps must print the uninterrupted run's steps 4-5 within 1e-6 (the
# kernels are deterministic; this checks the device <-> host copies).
# Then --cpu-offload (AdamW on the host, srt_cpu_adamw_step, whose fp32
# operations the device's AdamW kernel repeats exactly): the same 5 steps
# and evaluations bit for bit (losses, grad norms, eval losses, and every
# weight and moment saved after them, st_compare --rtol 0), and its own
# resume.
# Then context parallelism where there are 2 GPUs (NCCL takes one GPU per
# rank): the cuda program compiled with --cp-size=2 (the attention
# all-gathers K/V over cp, reduce-scatters dK/dV) on 2 ranks, its 5 steps
# against the same cpu tp1 run within LOSS_RTOL / NORM_RTOL; and for llama
# the packed documents of packed_batch (document boundaries crossing the cp
# chunks: the segment ids are gathered too), cuda cp2 against cpu tp1 on
# the same batch file. With one GPU these say they are skipped, and for
# NemotronH always (its cuda Mamba2 mixer has no cp form yet).
# Without a CUDA device: prints "SKIP: no CUDA device" and exits 77.
#
# usage: cuda_parity.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR DEVICES_PROBE
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5 PROBE=$6
LOSS_RTOL=${LOSS_RTOL:-2e-2} NORM_RTOL=${NORM_RTOL:-5e-2}
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
count=$("$PROBE") || { echo "SKIP: no CUDA device (the probe failed)"; exit 77; }
[ "$count" -gt 0 ] || { echo "SKIP: no CUDA device (0 devices)"; exit 77; }
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
TRAIN=(--data "$W/tokens.tok" --lr 1e-2 --max-grad-norm 1.0 --seed 11)
status=0
# offload ARCH CONFIG: --cpu-offload against the cuda program $W/ARCH.cuda,
# both run again here with our attention kernels (SHARD_CUDA_ATTENTION=
# kernel: cuDNN's SDPA backward need not repeat its bytes from run to run,
# ours do), with evaluations (forward-only steps) every 2 steps.
offload() {
  local arch=$1 config=$2 o=$W/$1.offload
  local eval=(--eval-data "$W/tokens.tok" --eval-every 2 --eval-batches 1)
  compile "$arch.offload" "$config" "$arch" --tp-size=1 --backend=cuda --cpu-offload || return 1
  SHARD_CUDA_ATTENTION=kernel "$o" "${TRAIN[@]}" "${eval[@]}" --steps 5 --save "$o.st" \
      >"$o.log" 2>&1 \
    && SHARD_CUDA_ATTENTION=kernel "$W/$arch.cuda" "${TRAIN[@]}" "${eval[@]}" --steps 5 \
         --save "$W/$arch.on.st" >"$W/$arch.on.log" 2>&1 \
    || { cat "$o.log"; echo "FAIL: $arch --cpu-offload run"; return 1; }
  grep -q "cpu offload:" "$o.log" || { echo "FAIL: $arch: the run does not say it offloads"; return 1; }
  [ "$(grep -c '^eval step' "$o.log")" = 3 ] || { echo "FAIL: $arch: expected evaluations at steps 2, 4, 5"; return 1; }
  if ! diff <(steps "$o.log"; grep '^eval step' "$o.log") \
            <(steps "$W/$arch.on.log"; grep '^eval step' "$W/$arch.on.log"); then
    echo "FAIL: $arch --cpu-offload: the step or eval lines differ from the cuda run's"; return 1
  fi
  "$BIN/st_compare" --rtol 0 "$o.st" "$W/$arch.on.st" >"$o.cmp" 2>&1 \
    && "$BIN/st_compare" --rtol 0 "$o.st.optim-00000005-0" "$W/$arch.on.st.optim-00000005-0" \
         >>"$o.cmp" 2>&1 \
    || { cat "$o.cmp"; echo "FAIL: $arch --cpu-offload: weights or moments differ"; return 1; }
  SHARD_CUDA_ATTENTION=kernel "$o" "${TRAIN[@]}" --steps 3 --save "$o.r.st" >"$o.r1.log" 2>&1 \
    && SHARD_CUDA_ATTENTION=kernel "$o" "${TRAIN[@]}" --steps 5 --load "$o.r.st" \
         >"$o.r2.log" 2>&1 \
    || { cat "$o.r1.log" "$o.r2.log"; echo "FAIL: $arch --cpu-offload resume"; return 1; }
  diff <(steps "$o.r2.log") <(steps "$o.log" | tail -n 2) >/dev/null \
    || { echo "FAIL: $arch --cpu-offload: resumed steps 4-5 differ"; return 1; }
  echo "CUDA-OFFLOAD $arch: 5 steps and 3 evaluations, weights and moments bit-identical to the cuda run; resume ok"
}
# within LABEL CANDIDATE_LOG REFERENCE_LOG: every step's loss within
# LOSS_RTOL and grad norm within NORM_RTOL of the reference's; prints the
# line, returns 1 when not.
within() {
  local n loss norm ok
  read -r n loss norm < <(max_rel "$2" "$3") || { echo "FAIL: $1: step lines differ"; return 1; }
  ok=$(awk -v l="$loss" -v g="$norm" -v lt="$LOSS_RTOL" -v gt="$NORM_RTOL" \
         'BEGIN { print (l <= lt && g <= gt) ? "ok" : "FAIL" }')
  echo "CUDA-PARITY $1: $n steps, max rel loss $loss (tol $LOSS_RTOL), grad norm $norm (tol $NORM_RTOL): $ok"
  [ "$ok" = ok ]
}
# context_parallel ARCH CONFIG: the cuda cp2 program on 2 ranks against the
# cpu tp1 run ($W/ARCH.cpu.log); for llama also on packed documents.
context_parallel() {
  local arch=$1 config=$2 p=$W/$1.cuda.cp2
  if [ "$count" -lt 2 ]; then
    echo "CUDA-PARITY $arch cp2: skipped (needs 2 GPUs, found $count)"; return 0
  fi
  compile "$arch.cuda.cp2" "$config" "$arch" --tp-size=1 --cp-size=2 --backend=cuda || return 1
  run 2 "$p" "${TRAIN[@]}" --steps 5 >"$p.log" 2>&1 \
    || { cat "$p.log"; echo "FAIL: $arch cuda cp2 run"; return 1; }
  within "$arch cp2 (cuda, 2 ranks) vs cpu tp1" "$p.log" "$W/$arch.cpu.log" || return 1
  [ "$arch" = llama ] || return 0
  "$BIN/packed_batch" 256 "$W/packed.safetensors" "$W/solo.safetensors" \
    "$W/joined.safetensors" "$W/cycled.safetensors" "$W/docs.tokens" >/dev/null \
    || { echo "FAIL: packed_batch"; return 1; }
  local docs=(--batch-file "$W/packed.safetensors" --steps 3 --lr 1e-2 --max-grad-norm 1.0 --seed 11)
  run 1 "$W/$arch.cpu" "${docs[@]}" >"$W/$arch.cpu.docs.log" 2>&1 \
    && run 2 "$p" "${docs[@]}" >"$p.docs.log" 2>&1 \
    || { cat "$W/$arch.cpu.docs.log" "$p.docs.log"; echo "FAIL: $arch packed documents runs"; return 1; }
  within "$arch cp2 (cuda) vs cpu tp1, packed documents" "$p.docs.log" "$W/$arch.cpu.docs.log"
}
for arch in qwen2 qwen3 llama gemma3 nemotron_h; do
  config=$CONFIGS/tiny-$arch.json
  compile "$arch.cpu" "$config" "$arch" --tp-size=1 || { status=1; continue; }
  compile "$arch.cuda" "$config" "$arch" --tp-size=1 --backend=cuda || { status=1; continue; }
  run 1 "$W/$arch.cpu" "${TRAIN[@]}" --steps 5 >"$W/$arch.cpu.log" 2>&1 \
    || { cat "$W/$arch.cpu.log"; echo "FAIL: $arch cpu run"; status=1; continue; }
  "$W/$arch.cuda" "${TRAIN[@]}" --steps 5 >"$W/$arch.cuda.log" 2>&1 \
    || { cat "$W/$arch.cuda.log"; echo "FAIL: $arch cuda run"; status=1; continue; }
  read -r n loss norm < <(max_rel "$W/$arch.cuda.log" "$W/$arch.cpu.log") \
    || { echo "FAIL: $arch: step lines differ"; status=1; continue; }
  ok=$(awk -v l="$loss" -v g="$norm" -v lt="$LOSS_RTOL" -v gt="$NORM_RTOL" \
         'BEGIN { print (l <= lt && g <= gt) ? "ok" : "FAIL" }')
  echo "CUDA-PARITY $arch tp1: $n steps, max rel loss $loss (tol $LOSS_RTOL), grad norm $norm (tol $NORM_RTOL): $ok"
  [ "$ok" = ok ] || status=1
  # Resume on the device.
  "$W/$arch.cuda" "${TRAIN[@]}" --steps 3 --save "$W/$arch.ckpt" >"$W/$arch.r1.log" 2>&1 \
    && "$W/$arch.cuda" "${TRAIN[@]}" --steps 5 --load "$W/$arch.ckpt" >"$W/$arch.r2.log" 2>&1 \
    || { cat "$W/$arch.r1.log" "$W/$arch.r2.log" 2>/dev/null; echo "FAIL: $arch cuda resume"; status=1; continue; }
  read -r n loss norm < <(max_rel_steps <(steps "$W/$arch.r2.log") <(steps "$W/$arch.cuda.log" | tail -n 2)) \
    || { echo "FAIL: $arch: resumed step lines differ"; status=1; continue; }
  ok=$(awk -v l="$loss" -v g="$norm" 'BEGIN { print (l <= 1e-6 && g <= 1e-6) ? "ok" : "FAIL" }')
  echo "CUDA-RESUME $arch: steps 4-5 after --load, max rel loss $loss, grad norm $norm: $ok"
  [ "$ok" = ok ] || status=1
  offload "$arch" "$config" || status=1
  if [ "$arch" = nemotron_h ]; then # lower-to-runtime refuses the mixer under cp on cuda
    echo "CUDA-PARITY $arch cp2: skipped (the cuda Mamba2 mixer has no cp form yet)"
  else
    context_parallel "$arch" "$config" || status=1
  fi
done
exit $status
