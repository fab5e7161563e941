#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, runs ctest (the lit suite
# and the C unit tests), then rebuilds with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the suite again. Exits non-zero on any
# failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)

"$root/scripts/build.sh" build
(cd "$root/build" && ctest --output-on-failure -j "$jobs")

echo "== sanitizer build (ASan + UBSan) =="
"$root/scripts/build.sh" build-asan -DSHARD_SANITIZE=ON
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$root/build-asan" && ctest --output-on-failure -j "$jobs")
