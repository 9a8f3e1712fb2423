#!/usr/bin/env bash
# Atari throughput in the method of Sample Factory's table: the env-only ceiling (ale-py's C++
# vector env alone, random actions, the same ACTORS processes and envs) next to mpirl's SPS with
# learning, and their ratio. A thin layer over bench/e2e_throughput.sh with an Atari workload.
# Usage: bench/atari_throughput.sh [ACTORS=2] [SECONDS=30] [GAME=breakout] [extra --set overrides...]
#   e.g. on the GPU machine: bench/atari_throughput.sh 14 60 breakout --set 'learner.device="cuda"'
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
actors=${1:-2}; secs=${2:-30}; game=${3:-breakout}; shift $(( $# > 3 ? 3 : $# )) || true
# 8 envs per actor, 32-step rollouts, the Nature CNN (model.encoder = "auto" on 84x84 frames).
exec "$root/bench/e2e_throughput.sh" "$actors" "$secs" --set "env.id=\"ale:$game\"" --set env.num_envs=8 \
  --set actor.rollout_len=32 --set learner.batch_size=32 "$@"
