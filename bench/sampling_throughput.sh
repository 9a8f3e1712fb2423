#!/usr/bin/env bash
# Sampling throughput without learning (Sample Factory's method: the parameters stay fixed), same
# actor ranks, one workload at a time, ratios against the env-only ceiling measured in the same run:
#   (A) env-only: ACTORS processes stepping the envs with random actions (ale-py's vector env for
#       ale:, bench_actor_ceiling --env-only otherwise): the pure-simulation ceiling
#   (L) mpirl, local inference: each actor runs the policy on its CPU core
#   (C) mpirl, central inference: one inference rank serves the actors (env_groups 1 and 2)
# mpirl runs with learner.frozen = true (batches received and counted, never trained on), 1
# learner + 1 replay (+ 1 inference rank in C). Prints one table; each mpirl row also gives the
# inference rank's mean rows per forward pass and request latency.
#
# Usage: bench/sampling_throughput.sh WORKLOAD [ACTORS=2] [SECONDS=30] [extra --set overrides...]
#   WORKLOAD: atari (ale:breakout, 8 envs per actor, the Nature CNN), minatar (minatar:breakout,
#   16 envs, the IMPALA CNN), emulated (Synthetic env, 16 envs, each step sleeps 1 ms, i.e. a
#   remote simulator, and an MLP of 2 x 512 on 7056 floats, about the CPU cost of an Atari policy;
#   central inference on an emulated accelerator: a sleep of inference.emulate_batch_us +
#   rows x emulate_row_us instead of the forward pass, EMULATE="BATCH_US ROW_US", default "1000 5":
#   about the Nature CNN on an H100 measured by bench/gpu_check.sh, 0.97 ms for 92 rows)
# The machine is named in the output. MPIRL_BUILD_DIR picks the build (default build/).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
workload=${1:?usage: bench/sampling_throughput.sh atari|minatar|emulated [ACTORS] [SECONDS] [--set ...]}
shift
actors=2 secs=30
for v in actors secs; do
  if [ $# -gt 0 ] && [[ "$1" != --* ]]; then printf -v "$v" '%s' "$1"; shift; fi
done
bin="${MPIRL_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
read -r emu_batch emu_row <<<"${EMULATE:-1000 5}"
case $workload in
  atari) sets=(--set 'env.id="ale:breakout"' --set env.num_envs=8) ;;
  minatar) sets=(--set 'env.id="minatar:breakout"' --set env.num_envs=16) ;;
  emulated) sets=(--set 'env.id="Synthetic"' --set env.obs_dim=7056 --set env.num_envs=16 --set env.step_cost_us=1000
                  --set 'env.cost_mode="sleep"' --set 'model.hidden=[512,512]') ;;
  *) echo "unknown workload $workload (atari, minatar, emulated)" >&2; exit 2 ;;
esac
sets+=(--set actor.rollout_len=32 --set learner.batch_size=8 --set replay.capacity=256 "$@")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "workload $workload: ${sets[*]}; $actors actor ranks, $secs s per row"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$workload" = atari ]; then
  for i in $(seq 1 "$actors"); do
    python3 "$root/bench/ale_env_only.py" --game breakout --num-envs 8 --seconds "$secs" --seed "$i" >"$tmp/env$i.json" &
  done
else
  for i in $(seq 1 "$actors"); do
    "$bin/bench_actor_ceiling" "${sets[@]}" --env-only --seconds "$secs" --stream "$i" >"$tmp/env$i.json" &
  done
fi
wait
env_only=$(python3 -c "import json,glob; print(sum(json.load(open(f))['sps'] for f in glob.glob('$tmp/env*.json')))")

row() {  # label, extra ranks, --set overrides...
  local label=$1 extra=$2
  shift 2
  local name="r$RANDOM"
  mpirun -n $((actors + 2 + extra)) --oversubscribe "$bin/mpirl" train "${sets[@]}" "$@" --set learner.frozen=true \
    --set run.out_dir="\"$tmp\"" --set run.name="\"$name\"" --set run.max_wall_seconds="$secs" \
    --set run.total_env_steps=1000000000000 --set run.log_interval_s=5 --set run.checkpoint='"never"' \
    --set replay.dump='"never"' --set run.tensorboard=false >"$tmp/$name.log" 2>&1 || { tail -30 "$tmp/$name.log"; exit 1; }
  python3 - "$tmp/$name/summary.json" "$label" "$env_only" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); label = sys.argv[2]; env_only = float(sys.argv[3])
inf = (s.get("inference") or {}).get("total") or {}
extra = (f"{inf['rows_mean']:6.1f} rows/batch, {inf['latency_ms_mean']:6.2f} ms latency, "
         f"{inf['forward_ms_mean']:6.2f} ms forward" if inf else "")
print(f"{label:<34} {s['sps']:9.0f} SPS  {100 * s['sps'] / env_only:5.1f}%  {extra}")
PY
}
printf '%-34s %9.0f SPS  100.0%%  (the ceiling)\n' "(A) env only, random actions" "$env_only"
row "(L) local inference" 0 --set 'actor.inference="local"'
if [ "$workload" = emulated ]; then
  row "(C) central, emulated, 1 group" 1 --set 'actor.inference="central"' --set actor.env_groups=1 \
    --set inference.emulate_batch_us="$emu_batch" --set inference.emulate_row_us="$emu_row"
  row "(C) central, emulated, 2 groups" 1 --set 'actor.inference="central"' --set actor.env_groups=2 \
    --set inference.emulate_batch_us="$emu_batch" --set inference.emulate_row_us="$emu_row"
  echo "(emulated accelerator: ${emu_batch} us per batch + ${emu_row} us per row, no forward pass)"
else
  row "(C) central inference, 1 group" 1 --set 'actor.inference="central"' --set actor.env_groups=1
  row "(C) central inference, 2 groups" 1 --set 'actor.inference="central"' --set actor.env_groups=2
fi
