#!/usr/bin/env bash
# The driver under process limits and environment settings a scheduler or an
# HPC module sets (issue 39): each run must train exactly like a plain run or
# be refused before step 1 with a message naming the setting.
#   - a 288 KiB main-thread stack (ulimit -s; OpenMPI's singleton start needs
#     about 200): a 256 KiB buffer on the stack crashed it (not under
#     AddressSanitizer, whose frames are larger);
#   - OMP_STACKSIZE below the kernels' floor: refused (it crashed);
#   - OpenMP teams smaller than the threads asked: the same losses and norms
#     as a plain run (garbage before; ctest's */omp_* run the wider tests);
#   - torchrun's or Slurm's variables without mpirun (issue 44): one process
#     trains as the plain run; several meet over TCP (e2e/env_launch trains
#     so), and a MASTER_ADDR that does not resolve ends them at once.
# usage: environment.sh BIN_DIR TEXT WORK_DIR
set -u
BIN=$1 TEXT=$2 W=$3 MPI=
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
TR0=("$BIN/train_tiny_dp1_tp1" --data "$W/t.tok" --lr 1e-2 --max-grad-norm 1)
TR=("${TR0[@]}" --steps 3)
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/t.tok" >/dev/null || fail "shard-tokens"
OMP_NUM_THREADS=2 "${TR[@]}" >"$W/plain.log" 2>&1 || { cat "$W/plain.log"; fail "plain run"; }
[ "$(steps "$W/plain.log" | wc -l)" = 3 ] || { cat "$W/plain.log"; fail "plain run: not 3 steps"; }

same() { # NAME: $W/NAME.log has the plain run's step lines exactly
  steps "$W/$1.log" | cmp -s - <(steps "$W/plain.log") \
    || { paste <(steps "$W/$1.log") <(steps "$W/plain.log"); fail "$1: steps differ from the plain run"; }
  echo "ok: $1: the plain run's losses and norms"
}
if [ -z "${ASAN_OPTIONS:-}" ]; then
  (ulimit -s 288 && OMP_NUM_THREADS=2 exec "${TR[@]}") >"$W/stack.log" 2>&1 \
    || { cat "$W/stack.log"; fail "ulimit -s 288: exit status $?"; }
  same stack
fi
for e in OMP_THREAD_LIMIT=1 OMP_DYNAMIC=true OMP_MAX_ACTIVE_LEVELS=0; do
  env OMP_NUM_THREADS=2 "$e" "${TR[@]}" >"$W/$e.log" 2>&1 || { cat "$W/$e.log"; fail "$e run"; }
  same "$e"
  grep -q "^train: note: .*${e%%=*}" "$W/$e.log" || { cat "$W/$e.log"; fail "$e: no note"; }
done
# A --metrics reader that goes away (a pipe to `head`): the records stop with
# a message and the run goes on to its last step, exit 0. (With the file
# open for reading too, the driver was its own reader: no EPIPE, and once
# the pipe filled the run blocked for good.) 600 records (~100 KB) overfill
# the 64 KiB pipe whenever head ends, so the write fails every time.
OMP_NUM_THREADS=2 timeout 120 "${TR0[@]}" --steps 600 --log-every 100 \
  --metrics >(head -n 2 >/dev/null) >"$W/pipe.log" 2>&1 \
  || { cat "$W/pipe.log"; fail "--metrics pipe: exit status $? (124: blocked)"; }
grep -q "^step 600/600" "$W/pipe.log" || { cat "$W/pipe.log"; fail "--metrics pipe: no step 600"; }
grep -q -- "--metrics .*write failed" "$W/pipe.log" || { cat "$W/pipe.log"; fail "--metrics pipe: no message"; }
echo "ok: a --metrics reader that went away: $(grep -m1 'write failed' "$W/pipe.log")"
# An env launch (torchrun's or Slurm's variables, no mpirun): of one process
# it trains like the plain run; several meet at MASTER_ADDR:MASTER_PORT over
# TCP (e2e/env_launch), so a MASTER_ADDR that does not resolve (torchrun's,
# or the first host of Slurm's node list) ends the process at once, naming
# the rank and the name.
TORCH=(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)
env OMP_NUM_THREADS=2 "${TORCH[@]}" "${TR[@]}" >"$W/torchrun1.log" 2>&1 \
  || { cat "$W/torchrun1.log"; fail "torchrun variables, WORLD_SIZE=1"; }
same torchrun1
expect_error "torchrun WORLD_SIZE=2" "rank 1 cannot resolve MASTER_ADDR 'h'" \
  -- env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=h MASTER_PORT=1 "${TR[@]}"
expect_error "srun without PMIx" "rank 2 cannot resolve MASTER_ADDR 'n1'" \
  -- env SLURM_PROCID=2 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_JOB_NODELIST='n[1-2]' \
  SLURM_JOB_ID=42 "${TR[@]}"
expect_error "RANK=x" "torchrun launch: RANK='x' is not a decimal integer" \
  -- env RANK=x WORLD_SIZE=2 "${TR[@]}"
expect_error "OMP_STACKSIZE=16K" "OMP_STACKSIZE=16K" "128 KiB" -- env OMP_STACKSIZE=16K "${TR[@]}"
echo PASS
