#!/usr/bin/env python3
"""Writes docs/results.md (and, with --plots, docs/images/results-SUITE.png) from the committed
suite results: bench/results/suites/SUITE/results.csv and curves/TASK-sSEED.csv, as
bench/learning.py --suite SUITE (or bench/suite_import.py) wrote them. The page is never edited by
hand: `--check` exits 1 when docs/results.md is not what this script writes (docs.site runs it).

Seeds 1-3 tuned the suite's config; seeds 4-6 are held out. The score is CleanRL's: the mean
return of the last 100 training episodes at the budget.

Usage: bench/results_page.py [--plots] [--check]
"""
import argparse
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learning import num  # noqa: E402
from suites import SUITE_REFERENCE_WALL_S, SUITE_REFERENCES, SUITE_TASKS, SUITES  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "suites")
PAGE = os.path.join(ROOT, "docs", "results.md")
TITLES = {"mujoco": "MuJoCo", "classic": "Classic control", "minatar": "MinAtar", "memory": "Memory (POPGym)"}
TUNING = (1, 2, 3)


def read(suite):
    with open(os.path.join(RESULTS, suite, "results.csv")) as f:
        rows = [{k: (num(v) if k not in ("task", "stop_reason", "error", "machine", "command") else v)
                 for k, v in r.items()} for r in csv.DictReader(f)]
    return [r for r in rows if not r.get("error")]


def env_of(task):
    sets = SUITE_TASKS[task][1]
    kw = [s.split("=", 1)[1] for s in sets if s.startswith("env.kwargs=")]
    for s in sets:
        if s.startswith("env.id="):
            return s.split("=", 1)[1].strip('"') + (f" (env.kwargs = {kw[0]})" if kw else "")
    return task


def mean_std(vals):
    if not vals:
        return "-"
    if len(vals) == 1:
        return f"{vals[0]:.1f} (1 seed)"
    return f"{statistics.mean(vals):.1f} +- {statistics.stdev(vals):.1f} ({len(vals)} seeds)"


def med(rows, key, f="{:.0f}"):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return f.format(statistics.median(vals)) if vals else "-"


def suite_section(suite, rows):
    tasks = [t for t in SUITES[suite] if any(r["task"] == t for r in rows)]
    missing = [env_of(t) for t in SUITES[suite] if t not in tasks]
    config, _, _, budget, _ = SUITE_TASKS[SUITES[suite][0]]
    out = [f"## {TITLES.get(suite, suite)}", "",
           f"`configs/{config}` for every env (only `env.id` changes), {budget:,} env steps per run, "
           f"`bench/learning.py --suite {suite}`.", "",
           "| env | seeds 1-3 (tuning) | seeds 4-6 (held out) | reference | reached it | steps to it (median) "
           "| time to it (median) | the reference's wall per run | wall per run (median) | env steps/s (median) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for t in tasks:
        rs = [r for r in rows if r["task"] == t]
        tune = [r["final_mean_return"] for r in rs if r["seed"] in TUNING]
        held = [r["final_mean_return"] for r in rs if r["seed"] not in TUNING]
        ref = SUITE_TASKS[t][2]
        reached = f"{sum(r['steps_to_threshold'] is not None for r in rs)}/{len(rs)}" if ref is not None else "-"
        rw, tts = SUITE_REFERENCE_WALL_S.get(t), [r["time_to_threshold_s"] for r in rs if r["time_to_threshold_s"]]
        ref_wall = "-" if rw is None else f"about {rw / 60:.0f} min" + (
            f" ({rw / statistics.median(tts):.0f}x mpirl's median time to it)" if tts else "")
        out.append(f"| {env_of(t)} | {mean_std(tune)} | {mean_std(held)} | {SUITE_REFERENCES.get(t, '-')} | "
                   f"{reached} | {med(rs, 'steps_to_threshold')} | {med(rs, 'time_to_threshold_s', '{:.0f} s')} | "
                   f"{ref_wall} | {med(rs, 'wall_time_s', '{:.0f} s')} | {med(rs, 'sps')} |")
    if missing:
        out += ["", "Not run yet: " + ", ".join(missing) + "."]
    out += ["", "Every run:", "", "| env | seed | return (last 100 episodes) | steps to reference | time to reference "
            "| env steps | wall | env steps/s |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (SUITES[suite].index(r["task"]), r["seed"])):
        tts = "-" if r["time_to_threshold_s"] is None else f"{r['time_to_threshold_s']:.0f} s"
        out.append(f"| {env_of(r['task'])} | {r['seed']}{'' if r['seed'] in TUNING else ' (held out)'} | "
                   f"{r['final_mean_return']:.1f} | {'-' if r['steps_to_threshold'] is None else r['steps_to_threshold']} | "
                   f"{tts} | {r['env_steps']} | {r['wall_time_s']:.0f} s | {r['sps']:.0f} |")
    machines = sorted({r["machine"] for r in rows if r.get("machine")})
    out += ["", "Machine: " + "; ".join(machines) + ". Runs were made one or two at a time, so wall time and "
            "env steps/s vary with what ran beside them.", "",
            f"![Return against env steps, every run](images/results-{suite}.png)", "",
            "The commands (also in the CSV's `command` column):", "", "```"]
    out += [r["command"] for r in sorted(rows, key=lambda r: (SUITES[suite].index(r["task"]), r["seed"]))]
    out += ["```", ""]
    return out


def page():
    suites = [s for s in SUITES if os.path.exists(os.path.join(RESULTS, s, "results.csv"))]
    out = ["# Results", "",
           "Generated by `bench/results_page.py` from `bench/results/suites/SUITE/results.csv` and its "
           "`curves/`; `ctest -R docs.site` fails when this page is not what the script writes, so it "
           "cannot drift from the committed results. Edit the CSVs (rerun the suites), never this page.", "",
           "The score is CleanRL's: the mean return over the last 100 training episodes at the budget. "
           "One config per suite, the same for every env and seed. Seeds 1-3 were used to tune it; seeds "
           "4-6 were not, and are reported apart. \"Steps/time to it\": the first metrics row whose "
           "100-episode mean reached the reference.", ""]
    for s in suites:
        out += suite_section(s, read(s))
    missing = [TITLES.get(s, s) for s in SUITES if s not in suites]
    if missing:
        out += ["## Not run yet", "", ", ".join(missing) + ": no committed results.", ""]
    return "\n".join(out)


def plots():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for suite in SUITES:
        if not os.path.exists(os.path.join(RESULTS, suite, "results.csv")):
            continue
        rows = read(suite)
        tasks = [t for t in SUITES[suite] if any(r["task"] == t for r in rows)]
        cols = min(3, len(tasks))
        nrow = (len(tasks) + cols - 1) // cols
        fig, axes = plt.subplots(nrow, cols, figsize=(4.2 * cols, 3.2 * nrow), squeeze=False)
        for i, t in enumerate(tasks):
            ax = axes[i // cols][i % cols]
            for r in sorted((r for r in rows if r["task"] == t), key=lambda r: r["seed"]):
                path = os.path.join(RESULTS, suite, "curves", f"{t}-s{r['seed']}.csv")
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    c = list(csv.DictReader(f))
                held = r["seed"] not in TUNING
                ax.plot([float(x["env_steps"]) for x in c], [float(x["mean_return"]) for x in c],
                        ls="--" if held else "-", lw=1, label=f"seed {r['seed']}{' (held out)' if held else ''}")
            if SUITE_TASKS[t][2] is not None:
                ax.axhline(SUITE_TASKS[t][2], color="grey", ls=":", lw=1, label="reference")
            ax.set_title(env_of(t), fontsize=9)
            ax.set_xlabel("env steps")
            ax.set_ylabel("mean return (100 ep.)")
            ax.legend(fontsize=6)
        for j in range(len(tasks), nrow * cols):
            axes[j // cols][j % cols].axis("off")
        fig.tight_layout()
        out = os.path.join(ROOT, "docs", "images", f"results-{suite}.png")
        fig.savefig(out, dpi=80)
        print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plots", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = page()
    if args.check:
        have = open(PAGE).read() if os.path.exists(PAGE) else ""
        if have != text:
            print("docs/results.md is not what bench/results_page.py writes from bench/results/suites/: "
                  "run bench/results_page.py (and --plots) and commit the page")
            sys.exit(1)
        print("docs/results.md matches bench/results/suites/")
        return
    with open(PAGE, "w") as f:
        f.write(text)
    print(f"wrote {PAGE}")
    if args.plots:
        plots()


if __name__ == "__main__":
    main()
