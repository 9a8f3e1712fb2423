#!/usr/bin/env bash
# The replay rank's saturation point (issue 31, item 3): build/bench_replay_load at rising offered
# rates (rollouts/s per actor, then unlimited), one job each, with raw MPI measured in every job.
# Prints offered vs achieved env steps/s, GB/s in and out, and sample latency; the rank saturates
# where achieved stops following offered.
# Usage: bench/replay_load.sh [ACTORS=2] [LEARNERS=1] [SECONDS=8] [RATES="2 5 10 20 0"] [-- bench options]
#   e.g. bench/replay_load.sh 2 1 8 "2 5 10 0" -- --obs-dim 7056 --envs 8 --T 32 --batch 32
# Across nodes: run the same under scripts/cluster-local.sh's mpirun (namespace nodes over TCP).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${MPIRL_BUILD_DIR:-$root/build}
actors=${1:-2} learners=${2:-1} secs=${3:-8} rates=${4:-"2 5 10 20 0"}
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = "--" ] && shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
n=$((learners + 1 + actors))
printf "%-12s %12s %12s %9s %9s %9s %9s %9s\n" "rate/actor" "offered st/s" "in st/s" "in GB/s" "out GB/s" "raw GB/s" "p50 ms" "p99 ms"
for r in $rates; do
  out=$(mpirun -n "$n" --oversubscribe "$build/bench_replay_load" --learners "$learners" --rate "$r" --seconds "$secs" "$@" 2>&1) ||
    { echo "$out" | tail -20; exit 1; }
  python3 - "$r" "$actors" <<PY "$out"
import re, sys
r, actors, text = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
T = int(re.search(r"T=(\d+)", text).group(1)); E = int(re.search(r"x (\d+) envs", text).group(1))
raw = float(re.search(r"raw MPI.*?: ([0-9.]+) GB/s", text).group(1))
m = re.search(r"replay in .*?: ([0-9.]+) items/s, ([0-9.]+) env steps/s, ([0-9.]+) GB/s", text)
o = re.search(r"replay out .*?: ([0-9.]+) items/s, ([0-9.]+) GB/s", text)
l = re.search(r"p50 ([0-9.]+) ms, p99 ([0-9.]+) ms", text)
offered = f"{r * actors * E * T:.0f}" if r > 0 else "unlimited"
print(f"{(str(r) if r > 0 else 'unlimited'):<12} {offered:>12} {float(m.group(2)):>12.0f} {float(m.group(3)):>9.3f} "
      f"{float(o.group(2)):>9.3f} {raw:>9.3f} {float(l.group(1)):>9.2f} {float(l.group(2)):>9.2f}")
PY
done
