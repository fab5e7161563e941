#!/usr/bin/env bash
# Runs upstream MLIR test files (e.g. llvm-project's mlir/test/Dialect/Shard/
# *.mlir, copied to DIR by hand: nothing is downloaded) twice: their RUN
# lines as written with MLIR_OPT for `mlir-opt`, then with SHARD_OPT in its
# place, unchanged otherwise. Prints per file whether each passes, and
# whether the RUN line names one of mlir-opt's test-only passes
# (`test-...`, which the MLIR C API, and so shard-opt, does not register).
#
# usage: bench/upstream_shard_tests.sh DIR [SHARD_OPT] [MLIR_OPT] [FILECHECK]
#   defaults: build/bin/shard-opt, mlir-opt-22, FileCheck-22
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: bench/upstream_shard_tests.sh DIR [SHARD_OPT] [MLIR_OPT] [FILECHECK]}
shard_opt=${2:-$here/build/bin/shard-opt}
# The RUN lines run in a scratch folder: a relative path would not be found.
[ -e "$shard_opt" ] && shard_opt=$(realpath "$shard_opt")
mlir_opt=${3:-mlir-opt-22}
filecheck=${4:-FileCheck-22}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The RUN lines of file $1 as one command each (a trailing '\' joins lines),
# with %s the file and `mlir-opt`/`FileCheck` the given tools.
run_lines() {
  sed -n 's|^// RUN: \{0,1\}||p' "$1" | awk '{ if (sub(/\\$/, "")) { cmd = cmd $0 } else { print cmd $0; cmd = "" } }'
}

# Runs the RUN lines of $1 with $2 as mlir-opt; 0 when every one passes.
run_with() {
  local file=$1 tool=$2 line status=0
  while IFS= read -r line; do
    line=${line//%s/$file}
    line=$(printf '%s' "$line" | sed -e "s|\\bmlir-opt\\b|$tool|g" -e "s|\\bFileCheck\\b|$filecheck|g")
    (cd "$tmp" && bash -c "set -o pipefail; $line") >/dev/null 2>&1 || status=1
  done < <(run_lines "$file")
  return $status
}

printf '%-48s %-9s %-9s %s\n' file mlir-opt shard-opt 'test-only pass'
both=0 upstream_only=0 eligible=0 total=0
for f in "$dir"/*.mlir; do
  total=$((total + 1))
  testpass=no
  run_lines "$f" | grep -Eq '(^|[ ,(-])-?-?test-[a-z]' && testpass=yes
  run_with "$f" "$mlir_opt" && up=pass || up=FAIL
  run_with "$f" "$shard_opt" && ours=pass || ours=FAIL
  printf '%-48s %-9s %-9s %s\n' "$(basename "$f")" "$up" "$ours" "$testpass"
  if [[ $up == pass && $testpass == no ]]; then
    eligible=$((eligible + 1))
    [[ $ours == pass ]] && both=$((both + 1)) || upstream_only=$((upstream_only + 1))
  fi
done
echo "$total files; $eligible pass with $mlir_opt and need no test-only pass;" \
     "shard-opt passes $both of them ($upstream_only fail)"
