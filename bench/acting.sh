#!/usr/bin/env bash
# The actor's per-step inference, models::Acting vs the generic torch path it replaced
# (bench_actor_ceiling --generic: Policy::step with the value head, torch sampling and log_prob),
# measured in the same run, one process at a time, on the Synthetic env with no step cost (busy,
# 0 us), so inference is all there is. Prints SPS of both and the ratio per policy and env count.
# Usage: [MPIRL_BUILD_DIR=dir] bench/acting.sh [SECONDS=5]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${MPIRL_BUILD_DIR:-$root/build}/bench_actor_ceiling"
secs=${1:-5}
base=(--set 'env.id="Synthetic"' --set env.step_cost_us=0 --set 'env.cost_mode="busy"' --seconds "$secs")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
sps() { "$bin" "${base[@]}" "$@" | python3 -c "import json,sys; print(json.load(sys.stdin)['sps'])"; }
printf '%-34s %14s %14s %8s\n' "policy, envs" "generic SPS" "Acting SPS" "ratio"
rows=("mlp:16:" "mlp:128:")
for core in lru gru lstm ssm mingru ffm; do rows+=("$core:16:--set model.core=\"$core\""); done
rows+=("lru:128:--set model.core=\"lru\"" "mlp, Pendulum (box):16:--set env.id=\"Pendulum-v1\"")
for row in "${rows[@]}"; do
  IFS=: read -r name envs extra <<< "$row"
  # shellcheck disable=SC2086
  g=$(sps --set env.num_envs="$envs" $extra --generic)
  # shellcheck disable=SC2086
  a=$(sps --set env.num_envs="$envs" $extra)
  printf '%-34s %14.0f %14.0f %7.2fx\n' "$name, $envs" "$g" "$a" "$(python3 -c "print($a / $g)")"
done
