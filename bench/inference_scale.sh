#!/usr/bin/env bash
# How many actors one CPU inference rank serves before it saturates. Synthetic env whose steps
# sleep (a remote simulator: the actors leave the CPU to the inference rank), an MLP of 2 x 512 on
# 7056 floats (about the CPU cost of an Atari policy), 16 envs per actor in 2 groups, central
# inference, learner.frozen = true; for each actor count: SPS, the env-only ceiling of that many
# actors (the env's cost is a sleep: ACTORS x one actor's), rows per forward pass, the forward
# time, the inference rank's busy fraction (forward time / wall time) and the batch-size histogram.
# Usage: bench/inference_scale.sh [SECONDS=20] [ACTOR COUNTS=1 2 4 8] [--set ...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs=${1:-20}
shift $(( $# > 0 ? 1 : 0 )) || true
counts=()
while [ $# -gt 0 ] && [[ "$1" != --* ]]; do counts+=("$1"); shift; done
[ ${#counts[@]} -gt 0 ] || counts=(1 2 4 8)
bin="${MPIRL_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sets=(--set 'env.id="Synthetic"' --set env.obs_dim=7056 --set env.num_envs=16 --set env.step_cost_us=1000
      --set 'env.cost_mode="sleep"' --set 'model.hidden=[512,512]' --set actor.rollout_len=32 --set learner.batch_size=8
      --set replay.capacity=512 --set 'actor.inference="central"' --set actor.env_groups=2 "$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "workload: ${sets[*]}; $secs s per row"
one=$("$bin/bench_actor_ceiling" "${sets[@]}" --env-only --seconds 10 --stream 1 | python3 -c "import json,sys; print(json.load(sys.stdin)['sps'])")
printf '%7s %9s %8s %9s %10s %6s  %s\n' actors SPS "ceiling" "rows/fwd" "forward ms" busy "batch rows histogram"
for a in "${counts[@]}"; do
  name="s$a"
  mpirun -n $((a + 3)) --oversubscribe "$bin/mpirl" train "${sets[@]}" --set learner.frozen=true \
    --set run.out_dir="\"$tmp\"" --set run.name="\"$name\"" --set run.max_wall_seconds="$secs" \
    --set run.total_env_steps=1000000000000 --set run.checkpoint='"never"' --set replay.dump='"never"' \
    --set run.tensorboard=false >"$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; exit 1; }
  python3 - "$tmp/$name/summary.json" "$a" "$one" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); a = int(sys.argv[2]); one = float(sys.argv[3])
t = s["inference"]["total"]
busy = t["forward_ms_mean"] * t["batches"] / 1e3 / s["wall_time_s"]
print(f"{a:7d} {s['sps']:9.0f} {100 * s['sps'] / (a * one):7.1f}% {t['rows_mean']:9.1f} {t['forward_ms_mean']:10.2f} "
      f"{100 * busy:5.0f}%  {t['batch_rows_hist']}")
PY
done
