#!/usr/bin/env python3
"""Plots a run's metrics.jsonl: mean return and SPS against env steps, into a PNG.
Usage: scripts/plot_metrics.py runs/NAME [--out runs/NAME/metrics.png]"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--out")
    a = ap.parse_args()
    path = os.path.join(a.run_dir, "metrics.jsonl")
    rows = [json.loads(l) for l in open(path) if l.strip()]
    if not rows:
        raise SystemExit(f"{path}: no metrics rows")
    steps = [r["env_steps"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    ax1.plot(steps, [r["mean_return"] if r.get("mean_return") is not None else float("nan") for r in rows])
    ax1.set_ylabel("mean return (last 100 episodes)")
    ax1.grid(alpha=0.3)
    ax2.plot(steps, [r["sps"] for r in rows], label="env SPS")
    ax2.plot(steps, [r["learner_samples_per_s"] for r in rows], label="learner samples/s")
    ax2.set_ylabel("per second")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("env steps")
    ax2.legend()
    ax2.grid(alpha=0.3)
    fig.suptitle(os.path.basename(os.path.normpath(a.run_dir)))
    out = a.out or os.path.join(a.run_dir, "metrics.png")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
