#!/usr/bin/env bash
# How libgomp's idle threads wait, measured where it matters: configs/minatar.toml (learner.threads =
# 2, the learner sets the pace) on Breakout for STEPS env steps (default 1M), alone and as two runs
# at once on the same cores, with
#   spin:    GOMP_SPINCOUNT=300000, libgomp's own default (set explicitly, so mpirl leaves it alone)
#   mpirl:   nothing set, so mpirl starts its ranks with GOMP_SPINCOUNT=10000 (app/omp_wait.h)
#   passive: OMP_WAIT_POLICY=PASSIVE (idle threads sleep at once)
# Prints each run's env steps/s and wall time; the ratios are between rows of this one invocation.
# Usage: [MPIRL_BUILD_DIR=dir] bench/omp_wait.sh [STEPS=1000000] [RANKS=4]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=${1:-1000000}; ranks=${2:-4}
bin="${MPIRL_BUILD_DIR:-$root/build}/mpirl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $ranks ranks per run, $steps env steps"
tmp=$(mktemp -d); keep=
one() {  # NAME [VAR=VALUE]: one run in the background
  local name=$1; shift
  env "$@" mpirun -n "$ranks" --oversubscribe "$bin" train --config "$root/configs/minatar.toml" \
    --set 'env.id="Breakout-MinAtar"' --set run.total_env_steps="$steps" --set run.out_dir="\"$tmp\"" \
    --set run.name="\"$name\"" --set 'run.checkpoint="never"' --set 'replay.dump="never"' \
    --set run.tensorboard=false --set run.log_interval_s=5 > "$tmp/$name.log" 2>&1 &
}
report() {  # NAME...: after wait
  for n in "$@"; do
    python3 - "$tmp/$n/summary.json" "$n" <<'PY' || { echo "$n: failed, its log: $tmp/$n.log"; tail -5 "$tmp/$n.log"; keep=1; }
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  {sys.argv[2]:<12} {s['sps']:8.0f} env steps/s  {s['wall_time_s']:6.1f} s  policy lag {s['policy_lag_mean']:.1f}")
PY
  done
}
echo "alone:"
one spin GOMP_SPINCOUNT=300000; wait; report spin
one mpirl; wait; report mpirl
one passive OMP_WAIT_POLICY=PASSIVE; wait; report passive
echo "two runs at once:"
one spin_a GOMP_SPINCOUNT=300000; one spin_b GOMP_SPINCOUNT=300000; wait; report spin_a spin_b
one mpirl_a; one mpirl_b; wait; report mpirl_a mpirl_b
one passive_a OMP_WAIT_POLICY=PASSIVE; one passive_b OMP_WAIT_POLICY=PASSIVE; wait; report passive_a passive_b
[ -n "${keep:-}" ] || rm -rf "$tmp"
