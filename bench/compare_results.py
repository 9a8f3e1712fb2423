#!/usr/bin/env python3
"""Compares a candidate's bench/learning.py results with a suite's, seed by seed, as a Markdown
table: for each task, every seed's final mean return (last 100 training episodes) under both, the
means over the tuning seeds (1-3) and the held-out ones (4-6) apart, and the steps to the reference
score. Only seeds the candidate has are compared, so a partly run candidate is never set against
seeds it lacks.

Usage: bench/compare_results.py BASE_DIR CANDIDATE_DIR [--names base,candidate]
  (each DIR holds a results.csv as written by bench/learning.py or bench/suite_import.py)
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning  # noqa: E402

TUNING = {1, 2, 3}


def read(d):
    """{(task, seed): row} of DIR/results.csv, read as bench/learning.py reads it."""
    try:
        return {(r["task"], r["seed"]): r for r in learning.read_results(d)}
    except (OSError, KeyError, ValueError) as e:
        raise SystemExit(f"compare_results: {os.path.join(d, 'results.csv')}: unreadable ({e!r})")


def final(r):
    v = r.get("final_mean_return")
    return float("nan") if v is None else v


def steps(r):
    s = r.get("steps_to_threshold")
    return "-" if s is None else f"{s / 1e6:.2f}M"


def mean(xs):
    return f"{statistics.mean(xs):.2f}" if xs else "-"


def table(base, cand, names):
    lines = [f"| task | seed | {names[0]} | {names[1]} | difference | steps to reference ({names[0]}, {names[1]}) |",
             "|---|---|---|---|---|---|"]
    for task in sorted({t for t, _ in cand}):
        groups = {"tuning": ([], []), "held-out": ([], [])}
        for seed in sorted(s for t, s in cand if t == task):
            c = cand[(task, seed)]
            b = base.get((task, seed))
            cf = final(c)
            bf = final(b) if b else float("nan")
            g = groups["tuning" if seed in TUNING else "held-out"]
            g[1].append(cf)
            if b:
                g[0].append(bf)
            diff = f"{cf - bf:+.2f}" if b else "-"
            lines.append(f"| {task} | {seed} | {bf:.2f} | {cf:.2f} | {diff} | {steps(b) if b else '-'}, {steps(c)} |")
        for label, (bs, cs) in groups.items():
            if cs:
                lines.append(f"| {task} | mean, {label} ({len(cs)}) | {mean(bs)} | {mean(cs)} | | |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("candidate")
    ap.add_argument("--names", default="base,candidate")
    args = ap.parse_args()
    names = args.names.split(",")
    if len(names) != 2:
        raise SystemExit("compare_results: --names takes two comma-separated names")
    print(table(read(args.base), read(args.candidate), names))


if __name__ == "__main__":
    sys.exit(main())
