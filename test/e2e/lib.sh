# Helpers shared by the e2e scripts (sourced). Needs BIN (the build's bin
# folder), MPI (mpiexec) and W (a work folder) to be set by the caller.

fail() { echo "FAIL: $*"; exit 1; }

# run NP PROGRAM ARGS...: the program under mpirun on NP ranks.
run() { local np=$1; shift; "$MPI" --allow-run-as-root --oversubscribe -np "$np" "$@"; }

# steps LOG: "step loss grad_norm" per logged step, exactly as printed.
steps() { awk '/^step /{split($2, k, "/"); print k[1], $5, $8}' "$1"; }

# compile NAME CONFIG PLAN SHARD-COMPILE-FLAGS...: $W/NAME, batch $BATCH, seq
# $SEQ; on failure prints the compiler's output and returns 1.
compile() {
  local name=$1 config=$2 plan=$3; shift 3
  "$BIN/shard-compile" "$config" --tp-plan="$plan" "$@" --batch "$BATCH" --seq "$SEQ" \
    -o "$W/$name" >"$W/$name.compile.log" 2>&1 \
    || { cat "$W/$name.compile.log"; echo "FAIL: shard-compile $name ($plan $*)"; return 1; }
}

# max_rel CANDIDATE_LOG REFERENCE_LOG: prints "<steps> <max rel loss> <max rel
# grad norm>" (relative to the reference) over the logs' step lines, which
# must be the same steps in the same order; fails (status 1, message on
# stderr) if the steps differ, a value is not a finite number, or there is no
# step. max_rel_steps does the same on steps' output.
max_rel() { max_rel_steps <(steps "$1") <(steps "$2"); }
max_rel_steps() {
  paste -d' ' "$1" "$2" | awk '
    function num(x) { return x ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
    function rel(x, y) { d = x - y; if (d < 0) d = -d; s = (y < 0 ? -y : y); return s > 0 ? d / s : d }
    NF != 6 || $1 != $4 || !num($2) || !num($3) || !num($5) || !num($6) {
      print "bad or misaligned step line: " $0 > "/dev/stderr"; bad = 1; next }
    { n++; a = rel($2, $5); b = rel($3, $6); if (a > ml) ml = a; if (b > mg) mg = b }
    END { if (bad || n == 0) exit 1; printf "%d %.3e %.3e\n", n, ml, mg }'
}

# expect_error NAME NEEDLE... -- COMMAND...: COMMAND must fail (non-zero exit)
# and its output must contain every NEEDLE.
expect_error() {
  local name=$1; shift; local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done; shift
  if "$@" >"$W/err.log" 2>&1; then cat "$W/err.log"; fail "$name: accepted (exit 0)"; fi
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$W/err.log" || { cat "$W/err.log"; fail "$name: no '$n' in the error"; }
  done
  echo "ok: $name refused: $(grep -m1 -E 'error|train:' "$W/err.log")"
}
