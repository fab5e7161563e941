#!/usr/bin/env bash
# The TCP rendezvous of an env launch (issue 44, item 5) across three
# namespace hosts (hosts_lib.sh; rank r on host h<r>, MASTER_ADDR h0's
# address 10.77.0.1), through shard-rendezvous with torchrun's variables and
# --timeout T (4 s). Without root or namespaces the same cases run on
# 127.0.0.1 in this namespace (each rank named h<r> by --host-name), rather
# than not at all. Each case asserts every process's exit status, its
# message and how long it took:
#   success: ranks 1 and 2 start first and rank 0 a second later, so they
#     retry until it listens (more than one connection attempt each); all
#     exit 0, each rank's payload is byte-identical (cmp) to rank 0's 128
#     random bytes, every rank prints the same hash and the same host table
#     (rank r on h<r>, the host names from the namespaces' UTS names).
#   wrong world size: rank 1 says WORLD_SIZE=3 to a rank 0 of 2: both exit 1
#     at once (within T) and both print "rank 1 says WORLD_SIZE=3, rank 0
#     has 2", rank 1 as rank 0's refusal naming MASTER_ADDR:MASTER_PORT.
#   duplicate rank: two processes say RANK=1: all three exit 1, naming it.
#   missing rank: WORLD_SIZE=3 without rank 2: rank 0 exits 1 after T and
#     within T + 2 s naming rank 2 as missing; rank 1 exits 1 within T + 2 s
#     naming MASTER_ADDR:MASTER_PORT (no answer in time, or rank 0's end).
#   missing rank 0: rank 1 alone exits 1 within T + 2 s naming
#     MASTER_ADDR:MASTER_PORT as unreachable.
#   port in use: a second rank 0 on the port of a waiting one exits 1 at
#     once naming the address, the port and "Address already in use".
# usage: rendezvous.sh BIN_DIR WORK_DIR
set -u
BIN=$1 W=$2
T=4
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hosts_lib.sh"
rm -rf "$W" && mkdir -p "$W" || fail "cannot create $W"
PIDS=()
stop_ranks() { local p; for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
if why=$(hosts_usable); then
  hosts_make 1 1 1
  trap 'stop_ranks; hosts_teardown' EXIT
  ADDR=$HOSTS_NET.1 PORT=29500 PEERS=$HOSTS_NET. # the peers' addresses
  # on_host I COMMAND...: COMMAND on host I under the host name $HP-h<I>.
  on_host() {
    local i=$1; shift
    ip netns exec "$HP-h$i" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$HP-h$i" "$@"
  }
  host_name() { echo "$HP-h$1"; }
else
  echo "${why#SKIP: }: the cases run on 127.0.0.1 in this namespace instead"
  trap stop_ranks EXIT
  ADDR=127.0.0.1 PORT=$((20000 + $$ % 20000)) PEERS=127.0.0.1:
  on_host() { local i=$1; shift; "$@" --host-name "h$i"; }
  host_name() { echo "h$1"; }
fi
echo "MASTER_ADDR:MASTER_PORT $ADDR:$PORT, --timeout $T"

# rank NAME HOST RANK WORLD [ARGS...]: shard-rendezvous as RANK of WORLD on
# HOST in the background; its output in $W/NAME.log, its exit status in
# $W/NAME.rc and its seconds in $W/NAME.s.
rank() {
  local name=$1 host=$2 r=$3 n=$4; shift 4
  (
    t0=$EPOCHREALTIME
    on_host "$host" env RANK="$r" WORLD_SIZE="$n" LOCAL_RANK=0 MASTER_ADDR="$ADDR" \
      MASTER_PORT="$PORT" "$BIN/shard-rendezvous" --timeout "$T" "$@" >"$W/$name.log" 2>&1
    echo $? >"$W/$name.rc"
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$W/$name.s"
  ) &
  PIDS+=($!)
}

# expect NAME STATUS MAX_SECONDS TEXT...: NAME exited with STATUS within
# MAX_SECONDS and its output holds every TEXT (fixed strings).
expect() {
  local name=$1 rc=$2 max=$3 t; shift 3
  [ "$(cat "$W/$name.rc")" = "$rc" ] \
    || { cat "$W/$name.log"; fail "$name: exit status $(cat "$W/$name.rc"), expected $rc"; }
  awk -v s="$(cat "$W/$name.s")" -v m="$max" 'BEGIN { exit !(s <= m) }' \
    || { cat "$W/$name.log"; fail "$name: took $(cat "$W/$name.s") s, more than $max s"; }
  for t in "$@"; do
    grep -qF -- "$t" "$W/$name.log" || { cat "$W/$name.log"; fail "$name: no '$t'"; }
  done
  echo "ok: $name exit $rc after $(cat "$W/$name.s") s: $(head -c 300 "$W/$name.log" | head -1)"
}
AT="MASTER_ADDR:MASTER_PORT $ADDR:$PORT"
LATE=$((T + 2))

# success, rank 0 last.
rank ok1 1 1 3 --payload-out "$W/ok1.bin"
rank ok2 2 2 3 --payload-out "$W/ok2.bin"
sleep 1
rank ok0 0 0 3 --payload-out "$W/ok0.bin"
wait
table=("host 0: $(host_name 0)" "host 1: $(host_name 1)" "host 2: $(host_name 2)")
for r in 0 1 2; do expect ok$r 0 "$T" "rank $r of 3 (torchrun launch" "${table[@]}"; done
[ "$(stat -c %s "$W/ok0.bin")" = 128 ] || fail "rank 0's payload is not 128 bytes"
for r in 1 2; do
  cmp "$W/ok0.bin" "$W/ok$r.bin" || fail "rank $r's payload differs from rank 0's"
  attempts=$(grep -o '[0-9]* connection attempts' "$W/ok$r.log" | cut -d' ' -f1)
  [ "${attempts:-0}" -gt 1 ] || fail "rank $r connected at once (${attempts:-no} attempts): no retry tested"
done
[ "$(grep -h '^payload ' "$W"/ok[012].log | sort -u | wc -l)" = 1 ] || fail "hashes differ"
echo "ok: 3 ranks on 3 hosts got rank 0's 128 bytes ($(grep -h '^payload ' "$W/ok0.log"))"

# wrong world size.
rank ws1 1 1 3
sleep 0.5
rank ws0 0 0 2
wait
expect ws0 1 "$T" "rank 1 says WORLD_SIZE=3, rank 0 has 2" "rank 0 refused the rendezvous at $AT"
expect ws1 1 "$T" "rank 0 at $AT refused: rank 1 says WORLD_SIZE=3, rank 0 has 2"

# duplicate rank.
rank du1 1 1 3
rank du2 2 1 3
sleep 0.5
rank du0 0 0 3
wait
expect du0 1 "$T" "rank 1 arrived twice (from $PEERS" "rank 0 refused the rendezvous at $AT"
for n in du1 du2; do expect $n 1 "$T" "rank 0 at $AT refused: " "rank 1 arrived twice"; done

# missing rank: rank 2 never starts.
rank mi1 1 1 3
sleep 0.5
rank mi0 0 0 3
wait
expect mi0 1 "$LATE" "rank 0 timed out after $T s at $AT: 1 of 3 ranks did not arrive: rank 2"
awk -v s="$(cat "$W/mi0.s")" -v t="$T" 'BEGIN { exit !(s >= t - 0.1) }' \
  || fail "rank 0 gave up after $(cat "$W/mi0.s") s, before its --timeout $T"
if grep -qF "no answer within" "$W/mi1.log"; then
  expect mi1 1 "$LATE" "rank 1 reached rank 0 at $AT but had no answer within $T s"
else
  expect mi1 1 "$LATE" "rank 0 at $AT refused: rank 0 ended the rendezvous: " "did not arrive: rank 2"
fi

# missing rank 0.
rank mz1 1 1 2
wait
expect mz1 1 "$LATE" "rank 1 could not reach rank 0 at $AT within $T s"

# port in use: pu0 waits for a rank 1 that never comes; pu0b wants its port.
rank pu0 0 0 2
sleep 0.5
rank pu0b 0 0 2
wait
expect pu0b 1 1 "rank 0 cannot listen on $AT: Address already in use"
expect pu0 1 "$LATE" "rank 0 timed out after $T s at $AT: 1 of 2 ranks did not arrive: rank 1"
echo PASS
