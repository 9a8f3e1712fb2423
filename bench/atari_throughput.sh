#!/usr/bin/env bash
# Atari throughput in the method of Sample Factory's table: the env-only ceiling (ale-py's C++
# vector env alone in a plain Python loop, random actions, the same ACTORS processes and envs) next
# to mpirl's SPS with learning, and their ratio; then bench/e2e_throughput.sh on the same workload
# (the env through mpirl's wrapper, with and without inference, and end to end).
# Usage: bench/atari_throughput.sh [ACTORS=2] [SECONDS=30] [GAME=breakout] [extra --set overrides...]
#   e.g. on the GPU machine: bench/atari_throughput.sh 14 60 breakout --set 'learner.device="cuda"'
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
actors=2 secs=30 game=breakout
for v in actors secs game; do  # positional arguments until the first --set
  if [ $# -gt 0 ] && [[ "$1" != --* ]]; then printf -v "$v" '%s' "$1"; shift; fi
done
envs=8
tmp=$(mktemp -d)
for i in $(seq 1 "$actors"); do
  python3 "$root/bench/ale_env_only.py" --game "$game" --num-envs "$envs" --seconds "$secs" --seed "$i" > "$tmp/ale$i.json" &
done
wait
ale=$(python3 -c "import json,glob; print(sum(json.load(open(f))['sps'] for f in glob.glob('$tmp/ale*.json')))")
echo "(A) ale-py's vector env alone, $actors processes x $envs envs, random actions: $(printf '%.0f' "$ale") SPS"
# 32-step rollouts, the Nature CNN (model.encoder = "auto" on 84x84 frames).
"$root/bench/e2e_throughput.sh" "$actors" "$secs" --set "env.id=\"ale:$game\"" --set env.num_envs=$envs \
  --set actor.rollout_len=32 --set learner.batch_size=32 "$@" > "$tmp/e2e.txt"
cat "$tmp/e2e.txt"
python3 - "$tmp/e2e.txt" "$ale" <<'PY'
import re, sys
ale = float(sys.argv[2])
for line in open(sys.argv[1]):
    m = re.match(r"\(b\) end to end.*?:\s+(\d+) SPS", line)
    if m:
        print(f"ratio (b)/(A), mpirl with learning over ale-py alone: {100 * float(m.group(1)) / ale:.1f}%")
PY
rm -rf "$tmp"
