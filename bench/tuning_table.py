#!/usr/bin/env python3
"""Collects tuning runs (each a run directory with summary.json and curve.jsonl) into one CSV of
final results and one curve CSV per run, for the committed record of issue 41's tuning.
Usage: bench/tuning_table.py RUNS_DIR OUT_DIR   (run names: <env>_<variant>_s<seed>)"""
import csv
import json
import os
import sys


def main(runs, out):
    os.makedirs(os.path.join(out, "curves"), exist_ok=True)
    rows = []
    for name in sorted(os.listdir(runs)):
        d = os.path.join(runs, name)
        try:
            s = json.load(open(os.path.join(d, "summary.json")))
        except OSError:
            continue
        env, variant, seed = name.rsplit("_", 2)[0], name.rsplit("_", 2)[1], name.rsplit("_", 2)[2].lstrip("s")
        cfg = open(os.path.join(d, "config.toml")).read() if os.path.exists(os.path.join(d, "config.toml")) else ""
        env_id = next((l.split("=", 1)[1].strip().strip('"') for l in cfg.splitlines() if l.startswith("id =")), env)
        rows.append({"run": name, "env": env_id, "variant": variant, "seed": seed,
                     "final_mean_return_100": round(s.get("final_mean_return") or float("nan"), 2),
                     "env_steps": s["env_steps"], "wall_time_s": round(s["wall_time_s"], 1), "sps": round(s["sps"]),
                     "entropy": round(s.get("entropy", float("nan")), 3)})
        curve = os.path.join(d, "curve.jsonl")
        if os.path.exists(curve):
            with open(os.path.join(out, "curves", name + ".csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["env_steps", "time_s", "mean_return"])
                for line in open(curve):
                    r = json.loads(line)
                    w.writerow([r.get("env_steps"), round(r.get("time_s", 0), 1), r.get("mean_return")])
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} runs -> {out}/runs.csv")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
