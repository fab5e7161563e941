#!/usr/bin/env bash
# An env launch trains (issue 44, item 5): processes started with torchrun's
# variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and no
# MPI launcher meet in the TCP rendezvous, build the TCP mesh and run the
# host plane and the cpu backend's collectives over it, never starting MPI.
# Across three namespace hosts (hosts_lib.sh: ranks 0-1 on h0, rank 2 on h1,
# rank 3 on h2; MASTER_ADDR h0's address), or on 127.0.0.1 where namespaces
# are refused:
#   dp2 x tp2 and tp2: the losses and grad norms of every step, the saved
#     weights and the optimizer state are bit-identical to the same program
#     under mpirun on one host (st_compare --rtol 0; every group of these
#     meshes has 2 ranks, and a sum of two is the same in either order).
#   save + resume across launchers: 2 steps env-launched then 2 more under
#     mpirun from that checkpoint, and 2 under mpirun then 2 env-launched,
#     both end bit-identical to 4 straight steps.
#   a rank killed mid-run (SIGKILL, after a checkpoint): every other rank
#     exits 1 within --timeout (8 s) + 4 s (at once: the dead rank's sockets
#     close), naming the peer it lost and the last complete checkpoint,
#     which then resumes under mpirun; a rank stalled (SIGSTOP): the same,
#     its partners naming it when --timeout passes.
# usage: env_launch.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32 T=8
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hosts_lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
export OMP_NUM_THREADS=1 # 4 ranks on 2 cores; the same in every run
# Kills every rank of this test still running (its pid file, no end yet).
stop_ranks() {
  local f
  for f in "$W"/*.pid; do
    [ -e "$f" ] && [ ! -e "${f%.pid}.end" ] && kill -KILL "$(cat "$f")" 2>/dev/null
  done
}
if why=$(hosts_usable); then
  hosts_make 2 1 1
  trap 'stop_ranks; hosts_teardown' EXIT
  ADDR=$HOSTS_NET.1
  # on_host I COMMAND...: COMMAND on host I under the host name $HP-h<I>.
  on_host() {
    local i=$1; shift
    ip netns exec "$HP-h$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$HP-h$i" "$@"
  }
else
  echo "${why#SKIP: }: the ranks run on 127.0.0.1 in this namespace instead"
  trap stop_ranks EXIT
  ADDR=127.0.0.1
  on_host() { shift; "$@"; }
fi
HOST_OF=(0 0 1 2) # rank -> host
PORT=$((20000 + $$ % 20000))
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile q_dp2tp2 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=2 --dp-size=2 || exit 1
compile q_tp2 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=2 || exit 1
TRAIN=(--data "$W/tokens.tok" --lr 1e-2 --max-grad-norm 1 --seed 3 --timeout "$T")

# envrun NAME N PROGRAM ARGS...: N ranks env-launched in the background, rank
# r's output in $W/NAME.r<r>.log, exit status in .rc, the time it ended in
# .end, pid in .pid. envwait waits for them.
envrun() {
  local name=$1 n=$2 r; shift 2
  PORT=$((PORT + 1))
  for ((r = 0; r < n; r++)); do
    (
      on_host "${HOST_OF[$r]}" env RANK=$r WORLD_SIZE="$n" LOCAL_RANK=$r MASTER_ADDR="$ADDR" \
        MASTER_PORT="$PORT" sh -c 'echo $$ >"$0" && exec "$@"' "$W/$name.r$r.pid" "$@" \
        >"$W/$name.r$r.log" 2>&1
      echo $? >"$W/$name.r$r.rc"
      echo "$EPOCHREALTIME" >"$W/$name.r$r.end"
    ) &
  done
}
envwait() {
  local name=$1 n=$2 r; wait
  for ((r = 0; r < n; r++)); do
    [ "$(cat "$W/$name.r$r.rc")" = 0 ] || { cat "$W/$name.r$r.log"; fail "$name: rank $r failed"; }
  done
}
# same A B STEP: the checkpoints A and B (weights and optimizer state of
# STEP) are bit-identical.
same() {
  "$BIN/st_compare" --rtol 0 "$1" "$2" >/dev/null || fail "weights $1 and $2 differ"
  "$BIN/st_compare" --rtol 0 "$1.optim-0000000$3-0" "$2.optim-0000000$3-0" >/dev/null \
    || fail "optimizer state of $1 and $2 differs"
}

for prog in dp2tp2:4 tp2:2; do
  p=${prog%:*} n=${prog#*:}
  mkdir -p "$W/$p-mpi" "$W/$p-env"
  run "$n" "$W/q_$p" "${TRAIN[@]}" --steps 4 --save "$W/$p-mpi/m.safetensors" \
    >"$W/$p-mpi.log" 2>&1 || { cat "$W/$p-mpi.log"; fail "$p under mpirun"; }
  envrun "$p-env" "$n" "$W/q_$p" "${TRAIN[@]}" --steps 4 --save "$W/$p-env/m.safetensors"
  envwait "$p-env" "$n"
  [ "$(steps "$W/$p-mpi.log" | wc -l)" = 4 ] || fail "$p: not 4 steps under mpirun"
  diff <(steps "$W/$p-mpi.log") <(steps "$W/$p-env.r0.log") || fail "$p: steps differ"
  same "$W/$p-mpi/m.safetensors" "$W/$p-env/m.safetensors" 4
  echo "ok: $p env-launched = mpirun, steps, weights and optimizer state bit for bit: $(steps "$W/$p-env.r0.log" | tr '\n' ' ')"
done
grep -q "ranks on this node" "$W/dp2tp2-env.r0.log" || fail "no threads line"

# Save + resume across the launchers.
mkdir -p "$W"/{e2,e2m4,m2,m2e4}
envrun e2 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps 2 --save "$W/e2/m.safetensors"
envwait e2 4
run 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps 4 --load "$W/e2/m.safetensors" \
  --save "$W/e2m4/m.safetensors" >"$W/e2m4.log" 2>&1 || { cat "$W/e2m4.log"; fail "mpirun resume"; }
run 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps 2 --save "$W/m2/m.safetensors" >"$W/m2.log" 2>&1 \
  || { cat "$W/m2.log"; fail "mpirun 2 steps"; }
envrun m2e4 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps 4 --load "$W/m2/m.safetensors" \
  --save "$W/m2e4/m.safetensors"
envwait m2e4 4
for x in "$W/e2m4.log" "$W/m2e4.r0.log"; do
  diff <(steps "$W/dp2tp2-mpi.log" | tail -2) <(steps "$x") || fail "$x: steps 3-4 differ"
done
same "$W/dp2tp2-mpi/m.safetensors" "$W/e2m4/m.safetensors" 4
same "$W/dp2tp2-mpi/m.safetensors" "$W/m2e4/m.safetensors" 4
echo "ok: env launch -> mpirun and mpirun -> env launch resumes end bit-identical to 4 straight steps"

# fault NAME SIGNAL: a dp2 x tp2 env launch saving every 2 steps; once a
# checkpoint exists, SIGNAL goes to rank 3 (KILL: it dies; STOP: it stalls,
# and is killed once the others are gone). Ranks 0-2 must exit 1 within
# --timeout + 4 s of the signal, naming a lost or silent peer (rank 3, or a
# rank that ended because of it) and the last complete checkpoint.
fault() {
  local name=$1 sig=$2 r log took i
  mkdir -p "$W/$name"
  envrun "$name" 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps 100000 --save-every 2 \
    --save "$W/$name/m.safetensors"
  for ((i = 0; i < 600; i++)); do
    grep -q "^saved .* at step [2-9]" "$W/$name.r0.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "^saved" "$W/$name.r0.log" || { cat "$W/$name.r0.log"; fail "$name: no checkpoint in 60 s"; }
  sleep 0.3 # into a step
  kill "-$sig" "$(cat "$W/$name.r3.pid")" || fail "$name: cannot signal rank 3"
  local t0=$EPOCHREALTIME
  for ((i = 0; i < 10 * (T + 10); i++)); do # a hang fails below, not at ctest's limit
    [ -e "$W/$name.r0.end" ] && [ -e "$W/$name.r1.end" ] && [ -e "$W/$name.r2.end" ] && break
    sleep 0.1
  done
  stop_ranks
  wait
  for r in 0 1 2; do
    log=$W/$name.r$r.log
    [ "$(cat "$W/$name.r$r.rc")" = 1 ] || { cat "$log"; fail "$name: rank $r exit $(cat "$W/$name.r$r.rc")"; }
    took=$(awk -v a="$t0" -v b="$(cat "$W/$name.r$r.end")" 'BEGIN { printf "%.2f", b - a }')
    awk -v s="$took" -v m=$((T + 4)) 'BEGIN { exit !(s <= m) }' \
      || fail "$name: rank $r exited $took s after SIG$sig, more than --timeout $T + 4 s"
    grep -qE "lost world rank [0-9]|world rank [0-9] never answered" "$log" \
      || { cat "$log"; fail "$name: rank $r names no lost peer"; }
    grep -q "the last complete checkpoint is '$W/$name/m.safetensors' (step " "$log" \
      || { cat "$log"; fail "$name: rank $r names no checkpoint"; }
    echo "ok: SIG$sig: rank $r exit 1 $took s after it: $(grep -m1 -oE "(lost|did not complete)[^(]*" "$log") | $(grep -m1 -o "the last complete.*" "$log")"
  done
}
fault kill KILL
grep -qh "lost world rank 3" "$W"/kill.r[12].log || fail "kill: rank 3's partners do not name it"
fault stall STOP
grep -qh "world rank 3 never answered" "$W"/stall.r*.log || fail "stall: nobody names rank 3"
ck=$(grep -ho "the last complete checkpoint is '[^']*' (step [0-9]*)" "$W/kill.r0.log")
k=${ck##*step } k=${k%)}
run 4 "$W/q_dp2tp2" "${TRAIN[@]}" --steps $((k + 1)) --load "$W/kill/m.safetensors" \
  >"$W/kill_resume.log" 2>&1 || { cat "$W/kill_resume.log"; fail "kill: no resume from step $k"; }
grep -q "^step $((k + 1))/" "$W/kill_resume.log" || fail "kill: the resume ran no step $((k + 1))"
echo "ok: the last complete checkpoint (step $k) resumes under mpirun"
echo PASS
