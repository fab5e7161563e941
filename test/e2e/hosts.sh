#!/usr/bin/env bash
# One training job across three hosts (issue 44, item 1): network
# namespaces on this machine (hosts_lib.sh), h0 with 2 slots, h1 and h2 with
# 1, so the dp2 x tp2 program's tp group of ranks 0-1 talks shared memory
# inside h0 and that of ranks 2-3 TCP between h1 and h2; dp crosses hosts
# too. Its loss and grad norm of every step, its saved weights and its
# optimizer state must be bit-identical to the same program on one host
# (every group has 2 ranks, and a sum of two is the same in either order,
# so no tolerance is needed). Also: with shared memory as the only
# transport between ranks (no TCP) the job fails before step 1: the hosts
# really share no memory. Skips (77) without root or where namespaces are refused.
# usage: hosts.sh CONFIG_DIR BIN_DIR MPIEXEC TEXT WORK_DIR
set -u
CONFIGS=$1 BIN=$2 MPI=$3 TEXT=$4 W=$5
BATCH=4 SEQ=32
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hosts_lib.sh"
hosts_usable || exit 77
rm -rf "$W" && mkdir -p "$W"/{one,three} || fail "cannot create $W"
"$BIN/shard-tokens" --windows "$TEXT" -o "$W/tokens.tok" >/dev/null || fail "shard-tokens"
compile q_dp2tp2 "$CONFIGS/tiny-qwen2.json" qwen2 --tp-size=2 --dp-size=2 || fail "compile"
TRAIN=(--data "$W/tokens.tok" --steps 4 --lr 1e-2 --max-grad-norm 1 --seed 3 --timeout 30)

run 4 "$W/q_dp2tp2" "${TRAIN[@]}" --save "$W/one/m.safetensors" >"$W/one.log" 2>&1 \
  || { cat "$W/one.log"; fail "the run on one host"; }
hosts_make 2 1 1
hosts_mpirun 4 --display-map "$W/q_dp2tp2" "${TRAIN[@]}" --save "$W/three/m.safetensors" \
  >"$W/three.log" 2>&1 || { cat "$W/three.log"; fail "the run across three hosts"; }
cat "$W/three.log"
# the map: ranks 0-1 on h0, rank 2 on h1 (10.77.0.2), rank 3 on h2.
for h in "$HP-h0[[:space:]].*Num procs: 2" "10.77.0.2.*Num procs: 1" "10.77.0.3.*Num procs: 1"; do
  grep -q "Data for node: $h" "$W/three.log" || fail "job map: no node '$h'"
done
[ "$(steps "$W/one.log" | wc -l)" = 4 ] || fail "not 4 steps on one host"
diff <(steps "$W/one.log") <(steps "$W/three.log") || fail "steps differ between one and three hosts"
echo "ok: losses and grad norms bit-identical on one and three hosts: $(steps "$W/three.log" | tr '\n' ' ')"
"$BIN/st_compare" --rtol 0 "$W/one/m.safetensors" "$W/three/m.safetensors" >/dev/null \
  || fail "saved weights differ"
"$BIN/st_compare" --rtol 0 "$W"/one/m.safetensors.optim-00000004-0 \
  "$W"/three/m.safetensors.optim-00000004-0 >/dev/null || fail "optimizer state differs"
echo "ok: saved weights and optimizer state bit-identical (st_compare --rtol 0)"
if HOSTS_BTL=self,vader hosts_mpirun 4 "$W/q_dp2tp2" "${TRAIN[@]}" >"$W/shm_only.log" 2>&1; then
  cat "$W/shm_only.log"; fail "ranks on different hosts connected without TCP"
fi
# (Open MPI's words vary: "unable to reach each other", or its help text
# lost in transit; no step may run.)
! grep -q "^step " "$W/shm_only.log" || fail "shared memory only: steps ran across hosts"
echo "ok: with shared memory only, the job across hosts fails before step 1"
echo PASS
