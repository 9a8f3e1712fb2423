#!/bin/bash
# The same network built-in and as a Python module (model.python, its twin bench/python_twin.py),
# in one invocation, as ratios:
#   learner  build/bench_learner (eager updates on synthetic batches, no MPI): samples/s of the MLP
#            and the LRU policy, built-in vs Python;
#   actors   a CartPole run (configs/classic.toml, 4 ranks: 2 actors with local inference, its
#            synchronous actors off so that they step freely as the measurements here always did),
#            env steps/s built-in vs Python, and the Python actors' cost per step over the built-in's;
#   central  the same run with central inference (5 ranks: an inference rank serves the 2 actors):
#            env steps/s, and the inference rank's forward pass per batch (ms, rows per batch, us
#            per row) from its summary.json, built-in vs Python.
# The Python LRU twin runs its recurrence as python/mpirl_policy does, a loop over time, and, as
# make_scan, through mpirl's scan operator (torch.ops.mpirl.linear_scan) as the built-in core does.
# Usage: bench/python_model.sh [--T 32] [--B 64] [--seconds 10] [--steps 200000] [--device cpu]
set -euo pipefail
cd "$(dirname "$0")/.."
T=32 B=64 SECONDS_EACH=10 STEPS=200000 DEVICE=cpu
while [ $# -gt 0 ]; do
  case "$1" in
    --T) T=$2; shift 2 ;;
    --B) B=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TWIN='model.python="bench/python_twin.py:make"'
TWIN_SCAN='model.python="bench/python_twin.py:make_scan"'
OUT=$(mktemp -d /tmp/mpirl-python-model-XXXXXX)
learner() {  # policy label sets...
  local policy=$1 label=$2; shift 2
  local sets=(--set 'learner.value_norm="none"')
  for s in "$@"; do sets+=(--set "$s"); done
  build/bench_learner --device "$DEVICE" --modes eager --policy "$policy" --T "$T" --B "$B" --seconds "$SECONDS_EACH" \
    "${sets[@]}" | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$label', r['samples_per_s'])"
}
{
  learner mlp builtin_mlp
  learner mlp python_mlp "$TWIN"
  learner lru builtin_lru
  learner lru python_lru "$TWIN"
  learner lru python_lru_scan "$TWIN_SCAN"
} | tee "$OUT/learner.txt"
actors() {  # label sets...
  local label=$1; shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  mpirun -n 4 --oversubscribe build/mpirl train --config configs/classic.toml --set 'learner.value_norm="none"' \
    --set actor.synchronous=false \
    --set run.total_env_steps="$STEPS" --set run.out_dir="\"$OUT\"" --set run.name="\"$label\"" \
    --set 'run.checkpoint="never"' --set run.tensorboard=false --set 'run.progress="lines"' "${sets[@]}" > "$OUT/$label.log" 2>&1
  python3 -c "import json; s=json.load(open('$OUT/$label/summary.json')); print('$label', s['sps'])"
}
{
  actors builtin_cartpole
  actors python_cartpole "$TWIN"
} | tee "$OUT/actors.txt"
central() {  # label sets...: the run's SPS, then the inference rank's forward ms per batch and rows per batch
  local label=$1; shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  mpirun -n 5 --oversubscribe build/mpirl train --config configs/classic.toml --set 'learner.value_norm="none"' \
    --set actor.synchronous=false \
    --set 'actor.inference="central"' --set run.total_env_steps="$STEPS" --set run.out_dir="\"$OUT\"" \
    --set run.name="\"$label\"" --set 'run.checkpoint="never"' --set run.tensorboard=false \
    --set 'run.progress="lines"' "${sets[@]}" > "$OUT/$label.log" 2>&1
  python3 -c "import json, sys; s=json.load(open('$OUT/$label/summary.json')); t=(s.get('inference') or {}).get('total')
if not t or not t.get('batches'): sys.exit('$label: summary.json has no inference batches (see $OUT/$label.log)')
print('$label', s['sps']); print('${label}_fwd_ms', t['forward_ms_mean']); print('${label}_rows', t['rows_mean'])"
}
{
  central builtin_central
  central python_central "$TWIN"
} | tee "$OUT/central.txt"
python3 - "$OUT" <<'PY'
import sys
out = sys.argv[1]
v = {}
for f in ("learner.txt", "actors.txt", "central.txt"):
    for line in open(f"{out}/{f}"):
        k, x = line.split()
        v[k] = float(x)
print("\n| what | built-in | Python module | Python / built-in |\n|---|---|---|---|")
for what, b, p, unit in (("learner samples/s, MLP", "builtin_mlp", "python_mlp", ""),
                         ("learner samples/s, LRU (Python: a loop over time)", "builtin_lru", "python_lru", ""),
                         ("learner samples/s, LRU (Python: the scan operator)", "builtin_lru", "python_lru_scan", ""),
                         ("env steps/s, CartPole run", "builtin_cartpole", "python_cartpole", ""),
                         ("env steps/s, CartPole run, central inference", "builtin_central", "python_central", "")):
    print(f"| {what} | {v[b]:.0f} | {v[p]:.0f} | {v[p] / v[b]:.2f} |")
# 2 actor ranks step the envs; per env step each pays 1/SPS * 2 s of actor time.
extra_us = (2 / v["python_cartpole"] - 2 / v["builtin_cartpole"]) * 1e6
print(f"\nActors: {extra_us:.1f} us more per env step with the Python module (2 actors, "
      f"{v['builtin_cartpole']:.0f} vs {v['python_cartpole']:.0f} env steps/s in all).")
b_ms, p_ms = v["builtin_central_fwd_ms"], v["python_central_fwd_ms"]
b_rows, p_rows = v["builtin_central_rows"], v["python_central_rows"]
print(f"Central inference: {b_ms:.3f} ms per batch built-in ({b_rows:.1f} rows, {1e3 * b_ms / b_rows:.1f} us per row), "
      f"{p_ms:.3f} ms Python ({p_rows:.1f} rows, {1e3 * p_ms / p_rows:.1f} us per row): "
      f"{p_ms - b_ms:+.3f} ms per batch. Outputs: {out}")
PY
