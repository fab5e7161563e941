#!/usr/bin/env bash
# Configures and builds into a build folder: scripts/build.sh [DIR] [cmake args...]
# (default DIR: build). Runs scripts/setup.sh first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build}
shift || true
"$root/scripts/setup.sh"
cmake -G Ninja -S "$root" -B "$root/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$root/$dir"
