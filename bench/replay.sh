#!/usr/bin/env bash
# Replay benchmarks: sum-tree / prioritized-selector ops per second on one core, then ingest
# throughput with K = 1..MAX_K actor ranks next to raw MPI bandwidth for the same messages.
#   bench/replay.sh [MAX_K] [extra bench_replay_ingest flags...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MPIRL_BUILD_DIR:-$root/build}"
max_k="${1:-2}"
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$build/bench_replay_ops"
for k in $(seq 1 "$max_k"); do
  mpirun -n $((k + 1)) --oversubscribe "$build/bench_replay_ingest" "$@"
done
