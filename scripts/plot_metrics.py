#!/usr/bin/env python3
"""Draws a run's learning curve into a PNG: the return against env steps from curve.jsonl (a point
every run.curve_interval_steps, so a 2-second run draws a curve too), with the threshold
(run.stop_mean_return) as a line and the run, its stop and its wall time in the title; below it,
the throughput from metrics.jsonl. A run without curve.jsonl (older ones, or
run.curve_interval_steps = 0) draws the return from the metrics rows.
Usage: scripts/plot_metrics.py runs/NAME [--out runs/NAME/metrics.png]"""
import argparse
import json
import math
import os
import tomllib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def value(r, k):
    v = r.get(k)
    return float("nan") if v is None else v


def title(run_dir, cfg, summary):
    run = cfg.get("run", {})
    head = (f"{os.path.basename(os.path.normpath(run_dir))}: {cfg.get('env', {}).get('id', '?')}, "
            f"{cfg.get('learner', {}).get('algo', '?')}")
    if not summary:
        return head + " (running)"
    d = summary.get("stop_decision") or {}
    if d.get("reason") == "stop_mean_return":
        return (head + f"\nreached {d['mean_return']:.1f} >= {run.get('stop_mean_return')} at "
                f"{d['env_steps']:,} env steps in {d['time_s']:.1f} s")
    r = summary.get("final_mean_return")
    return (head + f"\nstopped ({summary.get('stop_reason')}) at {summary['env_steps']:,} env steps in "
            f"{summary['wall_time_s']:.1f} s, mean return {'n/a' if r is None else f'{r:.1f}'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--out")
    a = ap.parse_args()
    metrics = rows(os.path.join(a.run_dir, "metrics.jsonl"))
    curve = rows(os.path.join(a.run_dir, "curve.jsonl"))
    if not metrics and not curve:
        raise SystemExit(f"{a.run_dir}: no metrics.jsonl or curve.jsonl rows")
    cfg, summary = {}, None
    if os.path.exists(os.path.join(a.run_dir, "config.toml")):
        with open(os.path.join(a.run_dir, "config.toml"), "rb") as f:
            cfg = tomllib.load(f)
    if os.path.exists(os.path.join(a.run_dir, "summary.json")):
        with open(os.path.join(a.run_dir, "summary.json")) as f:
            summary = json.load(f)

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    if curve:
        steps = [r["env_steps"] for r in curve]
        every = cfg.get("run", {}).get("curve_interval_steps")
        ax1.plot(steps, [value(r, "interval_return") for r in curve], ".", ms=3, alpha=0.5, color="tab:blue",
                 label=f"mean of the episodes ended in each {every:,} env steps" if every else "episodes ended")
        ax1.plot(steps, [value(r, "mean_return") for r in curve], color="tab:blue", lw=2,
                 label="mean of the last 100 episodes")
    else:
        ax1.plot([r["env_steps"] for r in metrics], [value(r, "mean_return") for r in metrics], color="tab:blue",
                 lw=2, label="mean of the last 100 episodes (metrics rows)")
    threshold = cfg.get("run", {}).get("stop_mean_return", float("nan"))
    if isinstance(threshold, (int, float)) and math.isfinite(threshold):
        ax1.axhline(threshold, color="tab:red", ls="--", lw=1, label=f"threshold {threshold:g}")
    d = (summary or {}).get("stop_decision") or {}
    if d.get("reason") == "stop_mean_return":
        ax1.axvline(d["env_steps"], color="tab:gray", ls=":", lw=1)
    ax1.set_ylabel("episode return")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)
    timed = [r for r in curve if r.get("time_s") is not None]
    if len(timed) > 2:
        # env SPS at the curve's env-step cadence (a short run has one or two metrics rows): steps
        # over seconds across a window of k curve points, k about 1/50 of the run.
        k = max(1, len(timed) // 50)
        xs, ys = [], []
        for i in range(k, len(timed)):
            dt = timed[i]["time_s"] - timed[i - k]["time_s"]
            if dt > 0:
                xs.append(timed[i]["env_steps"])
                ys.append((timed[i]["env_steps"] - timed[i - k]["env_steps"]) / dt)
        span = timed[k]["env_steps"] - timed[0]["env_steps"]
        ax2.plot(xs, ys, "-", color="tab:blue", label=f"env SPS (over {span:,} env steps)")
    elif metrics:
        ax2.plot([r["env_steps"] for r in metrics], [value(r, "sps") for r in metrics], ".-", color="tab:blue",
                 label="env SPS")
    if metrics:
        ax2.plot([r["env_steps"] for r in metrics], [value(r, "learner_samples_per_s") for r in metrics], "o",
                 color="tab:orange", ms=4, label="learner samples/s (metrics rows)")
    if metrics or len(timed) > 2:
        ax2.legend(fontsize=8)
    ax2.set_ylabel("per second")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("env steps")
    ax2.grid(alpha=0.3)
    ax2.ticklabel_format(axis="x", style="plain")
    fig.suptitle(title(a.run_dir, cfg, summary), fontsize=10)
    out = a.out or os.path.join(a.run_dir, "metrics.png")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
