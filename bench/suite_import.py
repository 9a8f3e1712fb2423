#!/usr/bin/env python3
"""Adds runs made outside bench/learning.py (a run directory with summary.json and metrics.jsonl,
e.g. a tuning run of the committed config) to a suite's results, as learning.py would have
recorded them: a row of OUT/results.csv (replacing the same task and seed) and OUT/curves/.
The command recorded is the run's own mpirun line, rebuilt from its config's overrides.

Usage: bench/suite_import.py --out bench/results/suites/mujoco --task mujoco_hopper --seed 2 \\
           --run /path/to/run_dir --command "mpirun -n 4 ... mpirl train --config configs/mujoco.toml ..."
"""
import argparse
import csv
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", required=True, choices=sorted(learning.TASKS))
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--command", required=True)
    args = ap.parse_args()
    threshold = learning.TASKS[args.task][2]
    try:
        s = json.load(open(os.path.join(args.run, "summary.json")))
    except (OSError, ValueError) as e:
        raise SystemExit(f"suite_import: --run {args.run}: no readable summary.json ({e}); nothing written")
    rows = learning.read_rows(args.run)
    steps, secs = learning.first_at(rows, threshold)
    lags = [r["policy_lag_mean"] for r in rows if r.get("policy_lag_mean") is not None]
    res = {"task": args.task, "seed": args.seed, "threshold": threshold, "steps_to_threshold": steps,
           "time_to_threshold_s": secs, "final_mean_return": s.get("final_mean_return"), "env_steps": s["env_steps"],
           "wall_time_s": s["wall_time_s"], "sps": s["sps"],
           "policy_lag_mean": statistics.median(lags) if lags else None,
           "lowest_after_threshold": learning.lowest_after(rows, threshold), "hold": 0,
           "stop_reason": s["stop_reason"], "machine": learning.machine(), "command": args.command,
           "run_dir": args.run}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.csv")
    old = learning.read_results(args.out) if os.path.exists(path) else []
    old = [r for r in old if not (r["task"] == args.task and r["seed"] == args.seed)]
    results = sorted(old + [res], key=lambda r: (r["task"], r["seed"]))
    learning.write_curves(args.out, [res])
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=learning.RESULT_KEYS, extrasaction="ignore")
        w.writeheader()
        w.writerows(results)
    print(f"{args.task} seed {args.seed}: {res['final_mean_return']} -> {path}")


if __name__ == "__main__":
    main()
