#!/usr/bin/env bash
# Learning benchmark (not a test): steps and wall time to each task's threshold, final return, SPS and
# policy lag, per seed and as medians, with a plot; see bench/learning.py. Examples:
#   bench/learning.sh                                   # the default tasks, seeds 1 2 3
#   bench/learning.sh --tasks cartpole_appo --seeds 1 2 3 4 5
#   bench/learning.sh --hold --tasks cartpole_default --set run.total_env_steps=6000000   # does it stay solved?
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec python3 "$root/bench/learning.py" --mpirl "${MPIRL_BUILD_DIR:-$root/build}/mpirl" "$@"
