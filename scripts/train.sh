#!/usr/bin/env bash
# Sets up, builds and runs the default training job: CartPole-v1 with IMPALA on 4 ranks (1 learner,
# 1 replay, 2 actors) until it is solved (configs/cartpole.toml), then draws the learning curve.
# Extra arguments go to `mpirl train`, e.g. --set learner.algo=appo. MPIRL_RANKS sets the number
# of ranks (default 4).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" mpirl   # only the binary the job runs (scripts/test.sh builds the tests, scripts/build.sh everything)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
name="cartpole-$(date +%Y%m%d-%H%M%S)"
mpirun -n "${MPIRL_RANKS:-4}" --oversubscribe "$root/build/mpirl" train --config "$root/configs/cartpole.toml" \
  --set "run.name=\"$name\"" "$@"
# The run directory (run.out_dir/run.name, unless the arguments changed them).
dir=$(ls -td runs/*/ 2>/dev/null | head -1)
dir=${dir%/}
[ -f "runs/$name/summary.json" ] && dir="runs/$name"
png=$(python3 "$root/scripts/plot_metrics.py" "$dir")
python3 - "$dir" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
d = s.get("stop_decision") or {}
solved = d.get("reason") == "stop_mean_return"
if solved:  # the window that made the decision; episodes drained after it move the final one
    print(f"solved: mean return {d['mean_return']:.1f} over the last {d['window_episodes']} episodes "
          f"at {d['env_steps']} env steps ({d['time_s']:.1f} s)")
r = s["final_mean_return"]
print(f"at the end{'' if solved else ' (' + s['stop_reason'] + ')'}: mean return "
      f"{r if r is None else round(r, 1)} over the last 100 episodes, {s['env_steps']} env steps "
      f"in {s['wall_time_s']:.1f} s")
PY
echo "run directory: $dir"
echo "learning curve: $png"
