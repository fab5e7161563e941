#!/usr/bin/env bash
# Installs every Debian package the project needs (Debian 12 "bookworm").
# Idempotent and quick: does nothing but one dpkg query when all are present.
set -euo pipefail

PACKAGES=(
  cmake ninja-build gcc g++ pkg-config python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools   # MLIR/LLVM C API, lit, FileCheck
  libopenmpi-dev openmpi-bin                               # CPU collectives, launcher
  libdnnl-dev                                              # CPU GEMM (oneDNN)
  libopenblas-dev                                          # bench/gemm_libs: the GEMM compared
  libjansson-dev                                           # JSON: configs, plans, safetensors headers
  libpcre2-dev libutf8proc-dev                             # tokenizer: pre-tokenizer regexes, Unicode normalization
  libxml2-utils                                            # xmllint: the shard-plot test checks its SVG
  zlib1g-dev                                               # CRC-32 of checkpoint tensors
  libcmocka-dev                                            # C unit tests
  iproute2                                                 # ip netns: the test hosts of e2e/hosts, e2e/host_faults
  clang libclang-rt-14-dev libomp-14-dev                   # libFuzzer targets (test/fuzz)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
