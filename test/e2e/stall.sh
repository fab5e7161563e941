#!/usr/bin/env bash
# A stalled rank (SIGSTOP) ends the whole job within the collective deadline
# (issue 13, "Done when"): `train --timeout 10` on 2 ranks, one stopped
# mid-run; the job must end within 30 s with exit 1, the other rank naming
# the collective, the step and the rank that never arrived (and that no
# checkpoint of the run is complete: it saves none), and it must
# wait without spinning a core (its CPU time over the wait is checked).
# usage: stall.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile q_tp2 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=2 || fail "compile"
"$MPI" --allow-run-as-root --oversubscribe -np 2 "$W/q_tp2" --data "$W/tokens.tok" \
  --steps 100000000 --lr 1e-3 --max-grad-norm 1 --log-every 1000000 --timeout 10 \
  >"$W/run.log" 2>&1 &
job=$! # mpiexec itself: the ranks are its children
trap 'kill -KILL $(pgrep -P "$job") "$job" 2>/dev/null' EXIT
# Both ranks up and stepping (the first log line is printed before step 1).
for _ in $(seq 100); do grep -q "^train: model" "$W/run.log" && break; sleep 0.1; done
sleep 2
ranks=$(pgrep -P "$job" | sort -n)
[ "$(echo "$ranks" | wc -l)" = 2 ] || fail "expected 2 ranks under mpiexec $job, found: $ranks"
stopped=$(echo "$ranks" | tail -1) waiting=$(echo "$ranks" | head -1)
kill -STOP "$stopped"
t0=$(date +%s.%N)
cpu0=$(awk '{print $14 + $15}' "/proc/$waiting/stat")
sleep 8 # inside the 10 s deadline: the other rank waits in a collective
cpu1=$(awk '{print $14 + $15}' "/proc/$waiting/stat" 2>/dev/null || echo "$cpu0")
ticks=$(getconf CLK_TCK)
if timeout 30 tail --pid="$job" -f /dev/null; then :; fi
wait "$job"; rc=$?
t1=$(date +%s.%N)
cat "$W/run.log"
elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}')
[ "$rc" -ne 0 ] || fail "the job exited 0 with a rank stopped"
awk -v e="$elapsed" 'BEGIN{exit !(e < 30)}' || fail "the job took $elapsed s to end (limit 30)"
grep -q "did not complete in 1[0-9] s at step [0-9]*: world rank(s) [01] never arrived" "$W/run.log" \
  || fail "no message naming the collective, the step and the missing rank"
grep -q "no complete checkpoint of this run (none saved or loaded yet)" "$W/run.log" \
  || fail "no word on the last complete checkpoint (this run saved none)"
cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$ticks" 'BEGIN{printf "%.2f", (b - a) / t}')
awk -v c="$cpu" 'BEGIN{exit !(c < 4)}' || fail "the waiting rank used $cpu s of CPU in 8 s of waiting"
echo "ok: a stopped rank ended the job in $elapsed s with exit $rc; the waiting rank used $cpu s of CPU in 8 s"
echo PASS
