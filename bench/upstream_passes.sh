#!/usr/bin/env bash
# Which of mlir-opt's passes shard-opt accepts: every pass `MLIR_OPT --help`
# lists is given to SHARD_OPT as a flag on an empty function; a pass it
# refuses as "not a flag nor a registered pass" is not registered by the
# MLIR C API (mlir-opt's test passes live in MLIR's test library, which the
# C API does not link). Prints the refused names and the counts that
# shard-opt --help states.
#
# usage: bench/upstream_passes.sh SHARD_OPT [MLIR_OPT]   (default mlir-opt-22)
set -euo pipefail
shard_opt=${1:?usage: bench/upstream_passes.sh SHARD_OPT [MLIR_OPT]}
mlir_opt=${2:-mlir-opt-22}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'func.func @f() { return }' > "$tmp/in.mlir"
# Pass names: the "--name" lines under "Compiler passes to run", up to the
# next top-level option.
"$mlir_opt" --help | awk '/Compiler passes to run/ {p = 1; next}
  /^  --[a-z]/ {p = 0}
  p && /^      --[a-z]/ {sub(/^ *--/, ""); sub(/[ =].*/, ""); print}' | sort -u > "$tmp/passes"
accepted=0 refused=0
while read -r pass; do
  message=$("$shard_opt" "--$pass" "$tmp/in.mlir" 2>&1 >/dev/null || true)
  if [[ $message == *'not a flag nor a registered pass'* ]]; then
    echo "refused: $pass"
    refused=$((refused + 1))
  else
    accepted=$((accepted + 1))
  fi
done < "$tmp/passes"
echo "$((accepted + refused)) passes listed by $mlir_opt: $accepted accepted, $refused refused"
