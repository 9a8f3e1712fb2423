#!/usr/bin/env python3
"""Adds runs made outside bench/learning.py (a run directory with summary.json and metrics.jsonl,
e.g. a tuning run of the committed config) to a suite's results, as learning.py would have
recorded them: a row of OUT/results.csv (replacing the same task and seed) and OUT/curves/.
The command recorded is the run's own mpirun line, rebuilt from its config's overrides.

Usage: bench/suite_import.py --out bench/results/suites/mujoco --task mujoco_hopper --seed 2 \\
           --run /path/to/run_dir --command "mpirun -n 4 ... mpirl train --config configs/mujoco.toml ..."

With --results DIR it merges every row of another `bench/learning.py --out DIR` invocation instead
(seeds run apart, e.g. the held-out ones), with their curves; paths inside this checkout in the
recorded commands become relative to it, DIR's runs/ becomes bench/out/SUITE/runs, and a copy of
the binary run from elsewhere (a queue runs a copy, so that a rebuild cannot change it mid-queue)
becomes build/mpirl, the path a reader of the results has.
"""
import argparse
import csv
import json
import os
import re
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--results", help="merge this learning.py --out directory's results.csv and curves")
    ap.add_argument("--task", choices=sorted(learning.TASKS))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--run")
    ap.add_argument("--command")
    args = ap.parse_args()
    if args.results:
        return merge(args.out, os.path.abspath(args.results))
    if None in (args.task, args.seed, args.run, args.command):
        ap.error("--task, --seed, --run and --command are required without --results")
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
    learning.write_curves(args.out, [res])
    path = write_merged(args.out, [res])
    print(f"{args.task} seed {args.seed}: {res['final_mean_return']} -> {path}")


def write_merged(out, new):
    """OUT/results.csv with `new` in place of the rows of the same task and seed, sorted."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "results.csv")
    old = learning.read_results(out) if os.path.exists(path) else []
    keys = {(r["task"], r["seed"]) for r in new}
    results = sorted([r for r in old if (r["task"], r["seed"]) not in keys] + new, key=lambda r: (r["task"], r["seed"]))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=learning.RESULT_KEYS, extrasaction="ignore")
        w.writeheader()
        w.writerows(results)
    return path


def merge(out, src):
    try:
        new = learning.read_results(src)
    except OSError as e:
        raise SystemExit(f"suite_import: --results {src}: no readable results.csv ({e}); nothing written")
    failed = [f"{r['task']} seed {r['seed']}" for r in new if r.get("error")]
    if failed:
        raise SystemExit(f"suite_import: --results {src}: failed runs ({', '.join(failed)}); rerun them first, "
                         "nothing written")
    suite = os.path.basename(os.path.normpath(out))
    for r in new:
        cmd = r["command"].replace(os.path.join(src, "runs"), f"bench/out/{suite}/runs")
        cmd = cmd.replace(learning.ROOT + os.sep, "")
        # Rows made on another machine (a GPU lend: bench/gpu_check.sh part "learn") name its
        # checkout and output folder: the configs become this checkout's, the runs bench/out's.
        cmd = re.sub(r"(?<=\s)\S*/(configs/[\w.-]+\.toml)", r"\1", cmd)
        cmd = re.sub(r'run\.out_dir="[^"]*"', f'run.out_dir="bench/out/{suite}/runs"', cmd)
        r["command"] = re.sub(r"(--oversubscribe) \S*/mpirl\w* (train )", r"\1 build/mpirl \2", cmd)
        curve = os.path.join(src, "curves", f"{r['task']}-s{r['seed']}.csv")
        if os.path.exists(curve):
            os.makedirs(os.path.join(out, "curves"), exist_ok=True)
            shutil.copyfile(curve, os.path.join(out, "curves", os.path.basename(curve)))
        print(f"{r['task']} seed {r['seed']}: {r['final_mean_return']}")
    print(f"{len(new)} rows -> {write_merged(out, new)}")


if __name__ == "__main__":
    main()
