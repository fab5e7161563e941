#!/usr/bin/env bash
# Lists the C functions of the given files (default: runtime/train/*.c) by
# length, longest first: "LINES FILE:LINE NAME". A function runs from the
# line its signature starts on (a line at column 0) to its closing "}" at
# column 0 (the project's clang-format layout).
# usage: scripts/function_lengths.sh [FILE.c...] | head
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- runtime/train/*.c
awk '
  FNR == 1 { start = 0 }
  /^[A-Za-z_][A-Za-z0-9_ \t*]*[ \t*]+\**[A-Za-z_][A-Za-z0-9_]*\(/ && !start {
    sig = FNR; name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
  }
  /^\{|\) \{$|\)\{$/ && sig && !start { start = sig }
  /;$/ && sig && !start && !/\{/ { sig = 0 }
  /^}/ && start { printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, name; start = 0; sig = 0 }
' "$@" | sort -rn
