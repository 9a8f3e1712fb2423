#!/usr/bin/env bash
# Where configs/mujoco.toml's time goes, whether a second learner thread helps, and what the
# gradient by hand gains. Its actors are
# synchronous (policy lag 0 whatever the speed) and idle while the learner updates, so a second
# torch thread in the learner would have a core to itself during the update. Prints:
#   - the env's own speed in one Python process (gymnasium, the fixed action 0.5 x the upper bound), and mpirl's native env
#     (envs/mujoco_locomotion.h) in one process: the most one actor rank could collect;
#   - Hopper-v4 (or ENV) for STEPS env steps (default 300k) with learner.threads = 1 and 2, and
#     with learner.grad_by_hand = false (autograd's step), one run at a time: env steps/s, wall
#     time, the share of the run the learner waited for its batch (the actors' share) and the
#     policy lag.
# Nothing else should run beside it; compare the rows of one invocation. mpirl's
# GOMP_SPINCOUNT=10000 applies to the 2-thread run (docs/running.md).
# Usage: [MPIRL_BUILD_DIR=dir] bench/mujoco_speed.sh [STEPS=300000] [ENV=gym:Hopper-v4]
# (ENV without gym: is the native env, e.g. Hopper-v4; the env-alone lines print both either way)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=${1:-300000}; env_id=${2:-gym:Hopper-v4}
bin="${MPIRL_BUILD_DIR:-$root/build}/mpirl"
replay_bin="${MPIRL_BUILD_DIR:-$root/build}/tests/mujoco_replay"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $env_id, $steps env steps, 4 ranks"
tmp=$(mktemp -d); keep=
python3 - "${env_id#gym:}" <<'PY'
import time, warnings
import gymnasium as gym
warnings.simplefilter("ignore")  # after the import: gymnasium sets its own filter (-v4 is deprecated)
e = gym.make(__import__("sys").argv[1])
e.reset(seed=0)
a, n = (0.5 * e.action_space.high).astype("float32"), 20000  # as mujoco_replay --speed
t = time.perf_counter()
for _ in range(n):
    if any(e.step(a)[2:4]):
        e.reset()
print(f"  the env alone (one process, a fixed action): {n / (time.perf_counter() - t):.0f} steps/s")
PY
if [ -x "$replay_bin" ]; then
  echo "  mpirl's native ${env_id#gym:} alone (one process, a fixed action): $("$replay_bin" --speed "${env_id#gym:}" 20000) steps/s"
fi
# name, then the learner's setting: one torch thread, two, and autograd's gradient in place of the
# closed form (learner.grad_by_hand = false: the config's step before it)
for variant in "threads1 learner.threads=1" "threads2 learner.threads=2" "autograd learner.grad_by_hand=false"; do
  name=${variant%% *}
  mpirun -n 4 --oversubscribe "$bin" train --config "$root/configs/mujoco.toml" \
    --set "env.id=\"$env_id\"" --set "${variant#* }" --set run.total_env_steps="$steps" \
    --set run.out_dir="\"$tmp\"" --set run.name="\"$name\"" --set 'run.checkpoint="never"' \
    --set 'replay.dump="never"' --set run.tensorboard=false --set run.log_interval_s=5 > "$tmp/$name.log" 2>&1 || true
  python3 - "$tmp/$name/summary.json" "$name" <<'PY' || { echo "$name: failed, its log: $tmp/$name.log"; tail -5 "$tmp/$name.log"; keep=1; }
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  learner {sys.argv[2]:<9} {s['sps']:7.0f} env steps/s  {s['wall_time_s']:6.1f} s  learner waiting "
      f"{100 * s['learner_wait_s'] / s['wall_time_s']:.0f}%  policy lag {s['policy_lag_mean']:.1f}")
PY
done
[ -n "${keep:-}" ] || rm -rf "$tmp"
