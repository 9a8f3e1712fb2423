#!/usr/bin/env bash
# End-to-end throughput vs the env-only and env + inference ceilings, same actors, same envs.
#   (0) env-only ceiling: ACTORS processes of bench_actor_ceiling --env-only (random actions)
#   (a) env + inference ceiling: ACTORS processes of bench_actor_ceiling (policy forward, no MPI)
#   (b) end to end: mpirun -n ACTORS+2 mpirl train (1 learner, 1 replay, ACTORS actors), with learning
#   ratios (b) / (0) (Sample Factory's table) and (b) / (a)
# Usage: [MPIRL_BUILD_DIR=dir] bench/e2e_throughput.sh [ACTORS=2] [SECONDS=20] [extra --set overrides...]
# Default workload: Synthetic env, 64-float observations, 4 actions, 16 envs per actor,
# 100 us per step spent sleeping (a simulator that leaves the CPU free); pass e.g.
# --set env.cost_mode=busy to spin instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
actors=${1:-2}; secs=${2:-20}; shift $(( $# > 2 ? 2 : $# )) || true
sets=(--set 'env.id="Synthetic"' --set env.step_cost_us=100 --set 'env.cost_mode="sleep"' --set env.num_envs=16 "$@")
bin="${MPIRL_BUILD_DIR:-$root/build}"  # e.g. MPIRL_BUILD_DIR=build-gpu on the GPU machine
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "workload: ${sets[*]}"
tmp=$(mktemp -d)
ceiling_of() {  # ACTORS processes at once, SPS summed
  for i in $(seq 1 "$actors"); do
    "$bin/bench_actor_ceiling" "${sets[@]}" --seconds "$secs" --stream "$i" "$@" > "$tmp/ceil$i.json" &
  done
  wait
  python3 -c "import json,glob; print(sum(json.load(open(f))['sps'] for f in glob.glob('$tmp/ceil*.json')))"
}
env_only=$(ceiling_of --env-only)
ceiling=$(ceiling_of)
mpirun -n $((actors + 2)) --oversubscribe "$bin/mpirl" train "${sets[@]}" --set run.out_dir="\"$tmp\"" \
  --set run.name='"e2e"' --set run.max_wall_seconds="$secs" --set run.total_env_steps=1000000000000 \
  --set run.log_interval_s=5 > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
python3 - "$tmp/e2e/summary.json" "$ceiling" "$actors" "$env_only" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); ceiling = float(sys.argv[2]); actors = int(sys.argv[3]); env_only = float(sys.argv[4])
print(f"(0) env-only ceiling, {actors} processes, random actions: {env_only:12.0f} SPS")
print(f"(a) env + inference ceiling, {actors} actor processes, no MPI: {ceiling:12.0f} SPS")
print(f"(b) end to end with learning, {actors} actor ranks + learner + replay: {s['sps']:12.0f} SPS "
      f"(learner {s['learner_samples_per_s']:.0f} samples/s, policy lag mean {s['policy_lag_mean']:.1f})")
print(f"ratio (b)/(0): {100 * s['sps'] / env_only:.1f}%   ratio (b)/(a): {100 * s['sps'] / ceiling:.1f}%")
PY
rm -rf "$tmp"
