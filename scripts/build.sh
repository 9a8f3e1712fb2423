#!/usr/bin/env bash
# Configures and builds mpirl into build/ (Ninja, ccache, precompiled torch header): every target
# (tests, benchmarks), or only the targets named (scripts/train.sh: `build.sh mpirl`; scripts/test.sh:
# `build.sh all`, everything but the benchmarks no test runs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CCACHE_BASEDIR="$root" CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
build="${MPIRL_BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
# No targets named: `all` and the benchmarks (EXCLUDE_FROM_ALL in CMakeLists.txt; scripts/test.sh
# builds `all` only).
targets=(--target all benchmarks); (($#)) && targets=(--target "$@")
cmake --build "$build" -j "${MPIRL_JOBS:-$(nproc)}" "${targets[@]}"
