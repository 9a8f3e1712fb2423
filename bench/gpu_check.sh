#!/usr/bin/env bash
# The GPU check in one call (issue 30): everything a lent GPU machine should measure, within about
# 8 minutes on one GPU and 16 cores, into one results file. What needs CUDA is skipped, and said
# to be, on a machine without it (the rehearsal on the CPU).
#   0. only when asked (GPU_CHECK_PARTS=learn, a call of its own): the Atari suite's learning run,
#      Breakout with a GPU learner and central inference for GPU_CHECK_LEARN_SECONDS (default 460)
#   1. mpirl selftest on one rank (scan, step and central inference on the GPU)
#   2. Atari Breakout with the learner on the GPU, the same ranks twice for SECONDS each: local
#      inference (1 learner, 1 replay, RANKS-2 actors) and central inference (1 inference rank on
#      the GPU, RANKS-3 actors, 2 env groups), beside ale-py's env-only ceiling of RANKS-2 processes
#   3. the GPU tests (ctest -L gpu: CUDA scan vs CPU, CUDA-graph step vs eager, NCCL on one GPU)
#   4. bench_scan --device cuda (bandwidth of the scan kernels), and the scan as a PyTorch operator
#      on CUDA (tests/ops/test_scan_op.py --cuda: CUDA against CPU through torch.ops.mpirl)
#   5. bench_learner graph vs eager (MLP and LRU, T = 32, B = 256; the LRU as a model.python twin too)
# (The measurement the lend is for first: a run cut short by its time limit keeps what it wrote.)
# Usage: bench/gpu_check.sh [BUILD_DIR=build] [RESULTS=bench/out/gpu_check.txt]
# Environment: GPU_CHECK_RANKS (default: the cores, at most 16), GPU_CHECK_SECONDS (default 120),
# GPU_CHECK_ENVS (envs per actor, default 8 as configs/atari_breakout.toml; the ceiling uses as
# many), GPU_CHECK_PARTS (default "selftest breakout tests kernels": which steps to run; "learn"
# is part 0, with GPU_CHECK_LEARN_SECONDS and GPU_CHECK_LEARN_SEED, default 1),
# GPU_CHECK_PYTHON (the Python with ale-py for the env-only ceiling; default: the one mpirl embeds,
# else python3), MPIRUN (default mpirun).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin=$(cd "${1:-$root/build}" && pwd)
results=${2:-$root/bench/out/gpu_check.txt}
mkdir -p "$(dirname "$results")"
: >"$results"
ranks=${GPU_CHECK_RANKS:-$(($(nproc) < 16 ? $(nproc) : 16))}
((ranks >= 4)) || ranks=4
secs=${GPU_CHECK_SECONDS:-120}
envs=${GPU_CHECK_ENVS:-8}
parts=" ${GPU_CHECK_PARTS:-selftest breakout tests kernels} "
part() { [[ $parts == *" $1 "* ]]; }
mpirun=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say() { echo "$*" | tee -a "$results"; }
run() {  # label, timeout seconds, command...: output into the results file, exit status said
  local label=$1 limit=$2
  shift 2
  say ""
  say "## $label"
  say "\$ $*"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$results" | tail -40
  local rc=${PIPESTATUS[0]}
  say "[$label: exit $rc after $((SECONDS - t0)) s$( ((rc == 124)) && echo ", stopped at its ${limit} s limit")]"
  return 0
}
gpu=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
device=cpu  # the learners' device in parts 0 and 2
((gpu)) && device=cuda

say "# mpirl GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
say "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
if ((gpu)); then
  say "GPU: $(nvidia-smi -L | head -4 | tr '\n' ' ')"
  say "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
else
  say "GPU: none visible (nvidia-smi absent or failing): the CUDA steps are skipped below, and said to be"
fi
say "mpirun: $($mpirun --version 2>&1 | head -1); binaries: $bin"

# 0. (part "learn", its own call: GPU_CHECK_PARTS=learn) Atari Breakout learning for
# GPU_CHECK_LEARN_SECONDS, the atari suite's run (bench/suites.py: GPU learner, central inference)
# through bench/learning.py, so that its results.csv and curves/ come back in the suite's form:
# bench/suite_import.py --out bench/results/suites/atari --results <RESULTS' folder>/atari
if part learn; then
  learn_secs=${GPU_CHECK_LEARN_SECONDS:-460}
  learn_out="$(cd "$(dirname "$results")" && pwd)/atari"
  # The suite's learner is on CUDA; the rehearsal on a CPU-only machine moves it to the CPU. The
  # replay holds two rounds of every actor's rollouts (as part 2's runs); the last --set wins.
  on_cpu=()
  ((gpu)) || on_cpu=('learner.device="cpu"')
  run "Atari suite: Breakout learning, learner on $device, central inference, $ranks ranks, ${learn_secs} s" \
    $((learn_secs + 60)) python3 "$root/bench/learning.py" --mpirl "$bin/mpirl" --mpirun "$mpirun" \
    --mpirun-arg=--bind-to --mpirun-arg=none --ranks "$ranks" --suite atari --seeds "${GPU_CHECK_LEARN_SEED:-1}" --out "$learn_out" \
    --set "${on_cpu[@]}" run.max_wall_seconds="$learn_secs" run.log_interval_s=5 \
    env.num_envs="$envs" replay.capacity=$((envs * ranks * 2))
  if [ -f "$learn_out/results.csv" ]; then
    say "(the run's results.csv, curves/ and runs/: $learn_out)"
  else  # killed before learning.py wrote its table: what the run left
    say "NO results.csv in $learn_out: the run's output and metrics so far are in $learn_out/runs/"
  fi
fi

# 1. The self-checks, central inference included, on this machine's device.
part selftest && run "mpirl selftest (1 rank)" 120 "$mpirun" -n 1 --oversubscribe "$bin/mpirl" selftest --config "$root/configs/atari_breakout.toml"

# 2. Breakout: env-only ceiling, then local and central inference with learning, same ranks.
py=${GPU_CHECK_PYTHON:-}
if [ -z "$py" ]; then
  embedded=$(strings "$bin/mpirl" 2>/dev/null | grep -m1 -E '/bin/python3(\.[0-9]+)?$' || true)
  if [ -n "$embedded" ] && [ -x "$embedded" ]; then py=$embedded; else py=python3; fi
fi
if part breakout; then
actors=$((ranks - 2))
tmp=$(mktemp -d)
say ""
say "## Breakout: ale-py alone, $actors processes x $envs envs, random actions, 20 s ($py)"
for i in $(seq 1 "$actors"); do
  timeout 60 "$py" "$root/bench/ale_env_only.py" --game breakout --num-envs "$envs" --seconds 20 --seed "$i" >"$tmp/ale$i.json" 2>>"$tmp/ale.err" &
done
wait
ale=$(python3 -c "import json,glob; print(sum(json.load(open(f))['sps'] for f in glob.glob('$tmp/ale*.json') if open(f).read().strip()))" 2>/dev/null || echo 0)
say "(A) env-only ceiling: $ale SPS"
[ -s "$tmp/ale.err" ] && tail -3 "$tmp/ale.err" | tee -a "$results"
breakout() {  # label, extra --set...
  local label=$1
  shift
  local name="b$RANDOM"
  local util=""
  if ((gpu)); then
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 10 >"$tmp/$name.smi" 2>/dev/null &
    util=$!
  fi
  run "Breakout, $label, learner on $device, $ranks ranks, ${secs} s" $((secs + 150)) \
    "$mpirun" -n "$ranks" --oversubscribe --bind-to none "$bin/mpirl" train --config "$root/configs/atari_breakout.toml" \
    --set "learner.device=\"$device\"" --set run.max_wall_seconds="$secs" --set run.log_interval_s=20 \
    --set run.out_dir="\"$tmp\"" --set run.name="\"$name\"" --set 'replay.dump="never"' --set env.num_envs="$envs" \
    --set replay.capacity=$((envs * ranks * 2)) "$@"
  [ -n "$util" ] && kill "$util" 2>/dev/null
  if [ -f "$tmp/$name/summary.json" ]; then
    python3 - "$tmp/$name/summary.json" "$label" "$ale" "$tmp/$name.smi" <<'PY' | tee -a "$results"
import json, os, sys
s = json.load(open(sys.argv[1])); label = sys.argv[2]; ale = float(sys.argv[3] or 0)
inf = (s.get("inference") or {}).get("total") or {}
smi = open(sys.argv[4]).read().split("\n") if os.path.exists(sys.argv[4]) else []
util = [l.strip() for l in smi if l.strip()]
print(f"RESULT {label}: {s['sps']:.0f} SPS ({100 * s['sps'] / ale:.1f}% of ale-only {ale:.0f})" if ale else
      f"RESULT {label}: {s['sps']:.0f} SPS", end="")
print(f", {s['env_steps']} env steps, {s['learner_updates']} updates, learner waited {s['learner_wait_s']:.0f} of "
      f"{s['wall_time_s']:.0f} s, policy lag {s['policy_lag_mean']:.1f} (max {s['policy_lag_max']}), "
      f"mean return {s['mean_return']}")
if inf:
    print(f"  inference: {inf['batches']} batches, {inf['rows_mean']:.1f} rows/batch (max {inf['rows_max']}), "
          f"forward {inf['forward_ms_mean']:.2f} ms, latency {inf['latency_ms_mean']:.2f} ms (max {inf['latency_ms_max']:.1f}), "
          f"histogram {inf['batch_rows_hist']}")
if util:
    print(f"  GPU utilization, memory (every 10 s): {'; '.join(util)}")
PY
  else
    say "RESULT $label: no summary.json (the run failed; see above)"
  fi
}
breakout "local inference" --set 'actor.inference="local"'
breakout "central inference" --set 'actor.inference="central"' --set actor.env_groups=2
breakout_done=1
fi

# 3. The GPU tests.
if ! part tests; then
  :
elif ((gpu)); then
  if [ -f "$bin/CTestTestfile.cmake" ] && grep -rq "mpirl_gpu_tests" "$bin/tests/CTestTestfile.cmake" 2>/dev/null; then
    run "ctest -L gpu" 240 bash -c "cd '$bin' && ctest -L gpu --output-on-failure"
  elif [ -x "$bin/tests/mpirl_gpu_tests" ]; then  # the same tests, without a configured build tree
    run "GPU tests (ctest -L gpu's binary)" 240 "$bin/tests/mpirl_gpu_tests" --gtest_brief=1
  else
    say "GPU tests: no $bin/tests/mpirl_gpu_tests (build with nvcc present)"
  fi
else
  say "SKIPPED (no GPU): ctest -L gpu"
fi

# 4-5. Kernel and learner-step throughput.
if ! part kernels; then
  :
elif ((gpu)); then
  run "bench_scan --device cuda" 90 "$bin/bench_scan" --device cuda --T 256,4096 --min-seconds 0.05
  run "torch.ops.mpirl.linear_scan on CUDA (python/mpirl_ops)" 120 env MPIRL_OPS_LIBRARY="$bin/libmpirl_ops.so" \
    "$py" "$root/tests/ops/test_scan_op.py" --cuda
  run "bench_learner MLP graph vs eager" 60 "$bin/bench_learner" --device cuda --policy mlp --T 32 --B 256 --seconds 3
  run "bench_learner LRU graph vs eager" 60 "$bin/bench_learner" --device cuda --policy lru --T 32 --B 256 --seconds 3
  # model.python: the built-ins' Python twins (bench/python_twin.py), captured or, where the
  # capture fails, eager with the reason in "step" (never measured on a GPU before this check)
  for twin in make make_scan; do
    run "bench_learner Python LRU twin ($twin) graph vs eager" 90 "$bin/bench_learner" --device cuda --policy lru \
      --T 32 --B 256 --seconds 3 --set "model.python=\"$root/bench/python_twin.py:$twin\"" --set 'learner.value_norm="none"'
  done
else
  say "SKIPPED (no GPU): bench_scan --device cuda, the scan operator on CUDA, bench_learner graph vs eager (CUDA graphs need a GPU)"
fi

rm -rf "${tmp:-/nonexistent}"
say ""
say "# done in $SECONDS s; results in $results"
