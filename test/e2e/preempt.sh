#!/usr/bin/env bash
# Preemption signals and leftovers of killed runs (issue 44), on the tiny
# Qwen2 config, tp2 on 2 ranks:
#   1. SIGTERM to one rank mid-run (--save, --save-every 1000): every rank
#      exits 75, rank 0 names the step it stopped after, the checkpoint
#      holds that step, and resuming from it prints the same loss and grad
#      norm (9 digits, bit-identical as printed) for the next 5 steps as an
#      uninterrupted run; its steps before the stop equal the straight run's;
#   2. SIGUSR1 to rank 0, SIGHUP to rank 1, SIGINT to rank 0, each alone
#      (likewise);
#   3. SIGUSR1 and SIGTERM to mpirun itself (Open MPI forwards SIGUSR1;
#      SIGTERM reaches every rank too, with odls_base_sigkill_timeout seconds
#      before its SIGKILL);
#   4. a second signal while the save of the stop blocks (its optimizer
#      temporary is a FIFO: fifo_temp shim): the rank exits 143 (128 + 15)
#      within 5 s, the previous checkpoint is byte-identical and resumes,
#      and the next start removes the killed save's optimizer placeholder;
#   5. SIGKILL of the writing rank at a random moment of a run saving every
#      step, 5 trials: the checkpoint loads and its next step equals the
#      straight run's, and after the next start no temporary and no
#      optimizer file that the weights do not name is left;
#   6. leftovers of live processes stay: a temporary locked (flock) by a
#      sleeping process survives the start that removes a dead one, an
#      orphaned optimizer file and a stale "DIR.partial"; a job holding the
#      --save lock makes the start refuse, removing nothing.
# Prints one line per fault: runs, exit statuses, seconds to exit, leftovers.
# usage: preempt.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
TRAIN=(--data "$W/tokens.tok" --lr 1e-2 --max-grad-norm 1 --seed 5)
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile q "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=2 || fail "compile"
JOB= HOLDERS= MPIX=()
trap '[ -n "$JOB" ] && kill -KILL $(pgrep -P "$JOB") "$JOB" 2>/dev/null; [ -z "$HOLDERS" ] || kill $HOLDERS 2>/dev/null' EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b - a}'; }

# start DIR ARGS...: the job in the background (JOB: mpirun), each rank under
# a shell that records its pid (DIR/pid.R) and exit status (DIR/status.R);
# returns once both ranks printed a step.
start() {
  local d=$1; shift
  rm -f "$d"/pid.* "$d"/status.*
  "$MPI" --allow-run-as-root --oversubscribe "${MPIX[@]}" -np 2 bash -c \
    'trap : TERM INT HUP USR1; r=$OMPI_COMM_WORLD_RANK; echo $$ >"$0/pid.$r"
     "$1" "${@:2}"; s=$?; echo $s >"$0/status.$r"; exit $s' "$d" "$W/q" "${TRAIN[@]}" "$@" \
    >"$d/log" 2>&1 &
  JOB=$!
  for _ in $(seq 300); do grep -qs "^step " "$d/log" && return 0; sleep 0.05; done
  cat "$d/log"; fail "$d: no step within 15 s"
}
# rank_pid DIR R: the training process of rank R.
rank_pid() { pgrep -P "$(cat "$1/pid.$2")"; }
# finish DIR T0: waits for the job (at most 60 s): RC its status, SEC the
# seconds since T0.
finish() {
  timeout 60 tail -s 0.05 --pid="$JOB" -f /dev/null || { kill -KILL "$JOB"; fail "$1: hangs"; }
  wait "$JOB"; RC=$? JOB= SEC=$(secs "$2")
}
# stopped_step LOG: the step of rank 0's stop line (fails without one).
stopped_step() {
  sed -n "s/^train: SIG[A-Z0-9]* received: finished step \([0-9]*\), checkpoint saved to .* exiting with status 75$/\1/p" "$1" \
    | grep . || { cat "$1"; fail "$1: no stop line naming the saved step"; }
}
# meta FILE KEY: the value of a "shardrt.KEY" of a safetensors header.
meta() { head -c 65536 "$1" | grep -ao "\"shardrt.$2\":\"[^\"]*\"" | cut -d'"' -f4; }
# leftovers DIR STEM: the files "STEM.*" beside checkpoint STEM other than
# its lock and the optimizer file it names.
leftovers() {
  ls "$1" | grep -F "$2." | grep -vxF -e "$2.lock" -e "$(meta "$1/$2" optimizer)" | tr '\n' ' '
}
# hold FILE: a sleeping process holding an flock on FILE (pid in HELD).
hold() {
  (flock -x 9 && exec sleep 120) 9<>"$1" >/dev/null 2>&1 &
  HELD=$! HOLDERS="$HOLDERS $!"
  for _ in $(seq 50); do flock -n "$1" true || return 0; sleep 0.1; done
  fail "hold: no lock on $1"
}

# The straight run: 8000 steps, every step logged.
mkdir -p "$W/straight"
run 2 "$W/q" "${TRAIN[@]}" --steps 8000 >"$W/straight/log" 2>&1 \
  || { tail "$W/straight/log"; fail "straight run"; }
steps "$W/straight/log" >"$W/straight.steps"

# resume_matches DIR CKPT STEP N: --load CKPT to STEP + N, saving to CKPT
# again; the N steps after STEP must be the straight run's.
resume_matches() {
  run 2 "$W/q" "${TRAIN[@]}" --load "$2" --steps $(($3 + $4)) --save "$2" >"$1/resume.log" 2>&1 \
    || { cat "$1/resume.log"; fail "$1: the checkpoint does not resume"; }
  grep -q "loaded '$2' at step $3$" "$1/resume.log" || { cat "$1/resume.log"; fail "$1: not resumed at step $3"; }
  diff <(sed -n "$(($3 + 1)),$(($3 + $4))p" "$W/straight.steps") <(steps "$1/resume.log") \
    || fail "$1: the steps after $3 differ from the straight run's"
}

# 1-2. A signal to one rank (pending, never interrupting a step: the
# sleeps are random).
one_rank() { # NAME SIGNAL RANK
  local d=$W/$1; mkdir -p "$d"
  start "$d" --steps 100000 --save "$d/ck.safetensors" --save-every 1000
  sleep 0.$((RANDOM % 5 + 1))
  kill -"$2" "$(rank_pid "$d" "$3")"; local t0; t0=$(now)
  finish "$d" "$t0"
  [ "$(cat "$d"/status.0 "$d"/status.1 | tr '\n' ' ')" = "75 75 " ] \
    || { cat "$d/log"; fail "$1: rank statuses $(cat "$d"/status.* | tr '\n' ' '), not 75 75"; }
  local s; s=$(stopped_step "$d/log") || exit 1
  diff <(head -n "$s" "$W/straight.steps") <(steps "$d/log") || fail "$1: steps 1-$s differ"
  [ "$(meta "$d/ck.safetensors" step)" = "$s" ] || fail "$1: the checkpoint is not at step $s"
  local left; left=$(leftovers "$d" ck.safetensors)
  resume_matches "$d" "$d/ck.safetensors" "$s" 5
  echo "fault $1: 1 run, rank statuses 75 75, mpirun $RC, $SEC s to exit, stopped after step $s," \
    "checkpoint at step $s resumes bit-identically (5 steps), leftovers: [$left]"
}
one_rank sigterm_rank1 TERM 1
one_rank sigusr1_rank0 USR1 0
one_rank sighup_rank1 HUP 1
one_rank sigint_rank0 INT 0

# 3. A signal to mpirun. Open MPI 4 forwards SIGUSR1 as is. On SIGTERM it
# sends SIGTERM to the ranks, stops relaying their output (a rank printing
# fast then blocks on its full stdout pipe: logged every 1000 steps here)
# and SIGKILLs what is left odls_base_sigkill_timeout seconds later (default
# 1; a rank it kills after its stop reports no status).
to_mpirun() { # NAME SIGNAL MPIRUN-FLAGS...
  local name=$1 d=$W/$1 sig=$2; mkdir -p "$d"; shift 2
  MPIX=("$@")
  start "$d" --steps 100000 --save "$d/ck.safetensors" --save-every 1000 --log-every 1000
  MPIX=()
  sleep 0.$((RANDOM % 5 + 1))
  kill -"$sig" "$JOB"; local t0; t0=$(now)
  finish "$d" "$t0"
  local s; s=$(stopped_step "$d/log") || exit 1
  local st; st=$(cat "$d"/status.* | tr '\n' ' ')
  [[ "$st" =~ ^(75 )+$ ]] || { cat "$d/log"; fail "$name: rank statuses '$st', not 75"; }
  [ "$(meta "$d/ck.safetensors" step)" = "$s" ] || fail "$name: the checkpoint is not at step $s"
  local left; left=$(leftovers "$d" ck.safetensors)
  resume_matches "$d" "$d/ck.safetensors" "$s" 5
  echo "fault $name: 1 run, rank statuses $st(of those mpirun let exit), mpirun $RC, $SEC s to exit," \
    "stopped after step $s, checkpoint at step $s resumes bit-identically (5 steps), leftovers: [$left]"
}
to_mpirun sigusr1_mpirun USR1
to_mpirun sigterm_mpirun TERM --mca odls_base_sigkill_timeout 3

# 4. A second signal. The first save (step 1000) is of a checkpoint saved
# at step 500; its optimizer temporary is a FIFO nobody reads, so rank 0
# blocks inside the save once the pipe is full.
d=$W/second; mkdir -p "$d"
run 2 "$W/q" "${TRAIN[@]}" --steps 500 --save "$d/ck.safetensors" >"$d/first.log" 2>&1 \
  || { cat "$d/first.log"; fail "second: the step-500 run"; }
mkdir -p "$d/step500" && cp "$d"/ck.safetensors* "$d/step500/" || fail "copy"
mkfifo "$d/ck.safetensors.optim-00001000-0.tmp.fifo00" || fail "mkfifo"
exec 3<>"$d/ck.safetensors.optim-00001000-0.tmp.fifo00"
# (under AddressSanitizer the shim comes before its runtime: allowed, as
# the shim replaces no function ASan intercepts)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export LD_PRELOAD="$BIN/libfifo_temp.so" SHARD_TEST_FIFO_TEMP=ck.safetensors.optim-
MPIX=(-x LD_PRELOAD -x SHARD_TEST_FIFO_TEMP -x ASAN_OPTIONS)
start "$d" --load "$d/ck.safetensors" --steps 100000 --save "$d/ck.safetensors" --save-every 1000
unset LD_PRELOAD SHARD_TEST_FIFO_TEMP; MPIX=()
timeout 60 head -c 4096 <&3 >/dev/null || fail "second: the save never started"
writer=$(rank_pid "$d" 0)
ls -l "/proc/$writer/fd" | grep -qF fifo00 || fail "second: rank 0 does not write the FIFO"
kill -TERM "$writer"; sleep 1.5; kill -TERM "$writer"; t0=$(now)
finish "$d" "$t0"
exec 3<&-
[ "$(cat "$d/status.0")" = 143 ] || { cat "$d/log"; fail "second: rank 0 exited $(cat "$d/status.0"), not 143"; }
awk -v s="$SEC" 'BEGIN{exit !(s < 5)}' || fail "second: $SEC s to exit after the second signal"
cmp "$d/ck.safetensors" "$d/step500/ck.safetensors" || fail "second: the step-500 weights changed"
cmp "$d/ck.safetensors.optim-00000500-0" "$d/step500/ck.safetensors.optim-00000500-0" \
  || fail "second: the step-500 optimizer file changed"
rm "$d/ck.safetensors.optim-00001000-0.tmp.fifo00"
left=$(leftovers "$d" ck.safetensors)
[ -n "$left" ] || fail "second: the killed save left nothing (its optimizer placeholder was expected)"
resume_matches "$d" "$d/ck.safetensors" 500 3
grep -q "^train: removed 1 leftover of a killed run" "$d/resume.log" || { cat "$d/resume.log"; fail "second: no removal line"; }
[ -z "$(leftovers "$d" ck.safetensors)" ] || fail "second: left after the next start: $(leftovers "$d" ck.safetensors)"
echo "fault second_signal: 1 run, rank 0 status 143, mpirun $RC, $SEC s to exit after the second signal," \
  "step-500 checkpoint byte-identical and resumes bit-identically, leftovers [$left] removed at the next start"

# 5. SIGKILL at random moments of a run that saves every step.
kills=0 left_total=0
for trial in 1 2 3 4 5; do
  d=$W/kill$trial; mkdir -p "$d"
  start "$d" --steps 100000 --save "$d/ck.safetensors" --save-every 1
  for _ in $(seq 300); do grep -qs "^saved " "$d/log" && break; sleep 0.05; done
  sleep 0.$((RANDOM % 9))$((RANDOM % 10))
  kill -KILL "$(rank_pid "$d" 0)"; t0=$(now)
  finish "$d" "$t0"
  [ "$(cat "$d/status.0")" = 137 ] || fail "kill$trial: rank 0 exited $(cat "$d/status.0")"
  left=$(leftovers "$d" ck.safetensors)
  s=$(grep "^saved '$d/ck.safetensors' at step" "$d/log" | tail -1 | awk '{print $NF}')
  [ -n "$s" ] || { cat "$d/log"; fail "kill$trial: not one save before the kill"; }
  # The file holds the last save announced, or the one in flight when its
  # rename was done before the kill.
  st=$(meta "$d/ck.safetensors" step)
  [ "$st" = "$s" ] || [ "$st" = $((s + 1)) ] || fail "kill$trial: checkpoint at step '$st', last save announced $s"
  resume_matches "$d" "$d/ck.safetensors" "$st" 1
  removed=$(grep -c "^train: removed" "$d/resume.log")
  [ -z "$(leftovers "$d" ck.safetensors)" ] || fail "kill$trial: left after the next start: $(leftovers "$d" ck.safetensors)"
  if [ -n "$left" ]; then
    [ "$removed" = 1 ] || { cat "$d/resume.log"; fail "kill$trial: no removal line for [$left]"; }
    left_total=$((left_total + 1))
  else
    [ "$removed" = 0 ] || fail "kill$trial: a removal line without leftovers"
  fi
  echo "fault sigkill trial $trial: rank 0 status 137, mpirun $RC, $SEC s to exit, checkpoint at step $st loads" \
    "and resumes bit-identically, leftovers [$left] -> none after the next start"
  kills=$((kills + 1))
done
echo "fault sigkill: $kills runs, $left_total left leftovers, all removed at the next start, 0 damaged checkpoints"

# 6. Leftovers of live processes. Beside a checkpoint: a dead temporary, a
# locked (live) one, an optimizer file no weights name, one of another
# checkpoint; a stale export staging folder.
d=$W/live; mkdir -p "$d"
run 2 "$W/q" "${TRAIN[@]}" --steps 3 --save "$d/ck.safetensors" --export "$d/hf" >"$d/first.log" 2>&1 \
  || { cat "$d/first.log"; fail "live: first run"; }
echo junk >"$d/ck.safetensors.tmp.dead01"
cp "$d/ck.safetensors.optim-00000003-0" "$d/ck.safetensors.optim-00000002-0"
echo junk >"$d/ck.safetensors.tmp.live01"
echo junk >"$d/other.safetensors.tmp.abcdef"
mkdir -p "$d/hf.partial" && cp "$d/hf/config.json" "$d/hf.partial/" || fail "copy"
hold "$d/ck.safetensors.tmp.live01"; holder=$HELD
# A job holding the --save lock: refused, nothing removed.
hold "$d/ck.safetensors.lock"; locker=$HELD
expect_error "a start while another job holds the --save lock" "belongs to another job running now" -- \
  run 2 "$W/q" "${TRAIN[@]}" --load "$d/ck.safetensors" --steps 4 --save "$d/ck.safetensors"
kill "$locker"; wait "$locker" 2>/dev/null
[ -f "$d/ck.safetensors.tmp.dead01" ] && [ -f "$d/ck.safetensors.optim-00000002-0" ] \
  || fail "live: the refused start removed files"
run 2 "$W/q" "${TRAIN[@]}" --load "$d/ck.safetensors" --steps 4 --save "$d/ck.safetensors" \
  --export "$d/hf" >"$d/next.log" 2>&1 || { cat "$d/next.log"; fail "live: next start"; }
grep "^train: removed 3 leftovers of a killed run" "$d/next.log" | grep -F "ck.safetensors.tmp.dead01" \
  | grep -F "ck.safetensors.optim-00000002-0" | grep -qF "hf.partial" || { cat "$d/next.log"; fail "live: removal line"; }
[ -f "$d/ck.safetensors.tmp.live01" ] || fail "live: the locked temporary of a live process was removed"
[ -f "$d/other.safetensors.tmp.abcdef" ] || fail "live: another checkpoint's temporary was removed"
[ ! -e "$d/hf.partial" ] && [ ! -e "$d/ck.safetensors.tmp.dead01" ] && [ ! -e "$d/ck.safetensors.optim-00000002-0" ] \
  || fail "live: a leftover stayed"
kill "$holder"; wait "$holder" 2>/dev/null
echo "fault live_leftovers: 2 runs (the locked one refused: 1, then 0), removed: dead temporary," \
  "orphaned optimizer file, hf.partial; kept: the live process's locked temporary, another checkpoint's"
