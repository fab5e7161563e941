#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, runs ctest (the lit suite
# and the C unit tests), builds the Release configuration (warnings are
# errors there too), then rebuilds with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the suite again. Exits non-zero on any
# failure. Where nvcc is installed the CUDA backend must build (every kernel,
# sm_90) and its GPU tests run, or skip without a GPU; the sanitizer build
# leaves it out (its GPU tests could only skip again). Last, the libFuzzer
# targets (test/fuzz, clang) replay their seed corpora and fuzz for a
# bounded time each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)

# The CUDA backend is required where its toolkit is complete (nvcc, cuDNN,
# NCCL), so that a broken kernel cannot pass as "left out".
cuda=AUTO
if { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } &&
   { [ -e /usr/local/cuda/include/cudnn.h ] || [ -e /usr/include/cudnn.h ]; } &&
   { [ -e /usr/local/cuda/include/nccl.h ] || [ -e /usr/include/nccl.h ]; }; then
  cuda=ON
fi
"$root/scripts/build.sh" build -DSHARD_CUDA=$cuda
(cd "$root/build" && ctest --output-on-failure -j "$jobs")
# ctest does not print a skipped test's output: say why the GPU tests skipped.
grep -h "^SKIP: no CUDA device" "$root/build/Testing/Temporary/LastTest.log" | sort | uniq -c || true

# Release (-O3) is what packagers and most users build: it must build
# warning-free too (its optimiser sees other maybe-uninitialised paths).
echo "== release build =="
"$root/scripts/build.sh" build-release -DCMAKE_BUILD_TYPE=Release -DSHARD_CUDA=OFF

echo "== sanitizer build (ASan + UBSan) =="
"$root/scripts/build.sh" build-asan -DSHARD_SANITIZE=ON -DSHARD_CUDA=OFF
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$root/build-asan" && ctest --output-on-failure -j "$jobs")

echo "== fuzzing (libFuzzer + ASan + UBSan, clang) =="
cmake -G Ninja -S "$root" -B "$root/build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSHARD_CUDA=OFF -DSHARD_FUZZ=ON >/dev/null
ninja -C "$root/build-fuzz" fuzz
(cd "$root/build-fuzz" && ctest -L fuzz --output-on-failure -j "$jobs")
grep -h "executions in" "$root/build-fuzz/Testing/Temporary/LastTest.log" || true
