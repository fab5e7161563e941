#!/usr/bin/env bash
# The CPU GEMM candidates side by side (bench/gemm_libs.c): OpenBLAS as
# Debian ships it (the core it detects from the CPU model), OpenBLAS forced
# to the core this CPU's feature bits call for (OPENBLAS_CORETYPE, which must
# be set before the library loads: the mechanism a runtime built on OpenBLAS
# would need), and oneDNN's dnnl_sgemm (dispatches on feature bits itself),
# each on the shapes training runs. docs/runtime.md records the outcome.
#
#   bench/gemm_libs.sh [BUILD_DIR] [THREADS]     defaults: build, nproc
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: bench/gemm_libs.sh [BUILD_DIR] [THREADS]  (defaults: build, nproc; about 3 minutes)"
[[ ${1:-} == -h || ${1:-} == --help ]] && { echo "$usage"; exit 0; }
build=${1:-$here/build}
threads=${2:-$(nproc)}
[[ -d $build ]] || { echo "gemm_libs: BUILD_DIR '$build' is not a directory" >&2; echo "$usage" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "gemm_libs: THREADS must be a positive count, got '$threads'" >&2; exit 2; }
bin=$build/bin/gemm_libs
[[ -x $bin ]] || { echo "gemm_libs: $bin is not built: configure $build with OpenBLAS installed (libopenblas-dev, scripts/setup.sh installs it), then ninja -C $build gemm_libs" >&2; exit 1; }

# The widest OpenBLAS x86-64 core the CPU's feature bits allow.
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
core=Prescott
[[ $flags == *" avx2 "* ]] && core=Haswell
[[ $flags == *" avx512f "* && $flags == *" avx512bw "* ]] && core=SkylakeX
[[ $flags == *" avx512_bf16 "* ]] && core=Cooperlake

echo "== OpenBLAS as detected, and oneDNN =="
"$bin" "$threads"
echo
echo "== OpenBLAS with OPENBLAS_CORETYPE=$core (from the CPU's feature bits), and oneDNN =="
OPENBLAS_CORETYPE=$core "$bin" "$threads"
echo
echo "== OpenBLAS on its SSE3 'Prescott' core (what it picks for a CPU model it does not know), and oneDNN =="
OPENBLAS_CORETYPE=Prescott "$bin" "$threads"
