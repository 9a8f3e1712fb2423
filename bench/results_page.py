#!/usr/bin/env python3
"""Writes docs/results.md (and, with --plots, docs/images/results-SUITE.png) from the committed
suite results: bench/results/suites/SUITE/results.csv and curves/TASK-sSEED.csv, as
bench/learning.py --suite SUITE (or bench/suite_import.py) wrote them, and the learning row of
README.md's "Measured" table from the same CSVs. Neither is edited by hand: `--check` exits 1 when
docs/results.md or that row is not what this script writes (docs.site runs it).

Seeds 1-3 tuned the suite's config; seeds 4-6 are held out. The score is CleanRL's: the mean
return of the last 100 training episodes at the budget.

Usage: bench/results_page.py [--plots] [--check]
"""
import argparse
import csv
import os
import shlex
import statistics
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learning import num  # noqa: E402
from suites import (MEMORY_CORES, MEMORY_ENVS, SUITE_REFERENCE_WALL_S, SUITE_REFERENCES, SUITE_TASKS,  # noqa: E402
                    SUITES, memory_cell)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "suites")
PAGE = os.path.join(ROOT, "docs", "results.md")
README = os.path.join(ROOT, "README.md")
# The README's "Measured" table has one row of learning results, written here from the same CSVs
# so that it cannot drift either: the suites it quotes, with the reference each is measured against.
README_ROW = "| Learning per env step"
README_SUITES = (("mujoco", "MuJoCo at 1M steps against CleanRL's PPO", "CleanRL"),
                 ("minatar_10m", "MinAtar at 10M steps against gymnax's PPO", "gymnax"))
TITLES = {"mujoco": "MuJoCo", "mujoco_native": "MuJoCo on mpirl's native envs", "classic": "Classic control", "minatar": "MinAtar", "memory": "Memory (POPGym)",
          "minatar_10m": "MinAtar at 10M steps (gymnax's budget)",
          "minatar_paper": "MinAtar with the package's settings (APPO)",
          "r2d2_minatar": "MinAtar with the package's settings (R2D2)",
          "r2d2_classic": "Classic control (R2D2)", "atari": "Atari (GPU learner, central inference)"}
# How a suite's runs shared their machine, where it is not the usual one to five at a time.
RUN_NOTES = {"atari": "One run per call of a lend, alone on the machine.",
             "mujoco": "One run at a time on the AMD VM with AVX-512 (December 3), with the config's "
                       "gradient in closed form (learner.grad_by_hand, docs/algorithms.md).",
             "mujoco_native": "One run at a time on the AMD VM with AVX-512 (December 3), with the config's "
                              "gradient in closed form (learner.grad_by_hand, docs/algorithms.md)."}
# How each seed's runs of a suite shared their machine (the CSV records the machine only); a suite
# listed here needs an entry for every seed it has, or its page says "not recorded".
SEED_RUNS = {"memory": {1: "one at a time on the Xeon VM, beside builds and tests at times",
                        2: "on the AMD VM (41 cells) and the Xeon VM (7), mostly beside a MinAtar run",
                        3: "one at a time on the AMD VM (its first LRU cells beside a few short runs)",
                        4: "one at a time on the AMD VM (lru, mingru, ffm and ssm on every task on December 1; "
                           "gru and lstm on every task on December 2)",
                        5: "one at a time on the AMD VM, December 2 (GRU's and LSTM's eight cells each on a "
                           "faster AMD VM with AVX-512, later that day, five of LSTM's with short MuJoCo test "
                           "runs beside them)",
                        6: "one at a time on a faster AMD VM with AVX-512, December 2 (short MuJoCo test runs "
                           "of 10-90 s beside some of the LRU, minGRU, SSM and FFM cells)"},
             "minatar_paper": {1: "on the Xeon VM, one to five runs at a time",
                               2: "on the AMD VM, beside other runs (SpaceInvaders alone)",
                               3: "one at a time on the AMD VM", 4: "one at a time on the AMD VM",
                               5: "one at a time on the AMD VM (Asterix's run beside a fresh clone's build and "
                                  "CartPole run for 4.5 of its minutes)",
                               6: "one at a time on the AMD VM"}}


def seed_runs(suite, rows):
    """The machine line's account of how each seed's runs shared their machine."""
    notes = SEED_RUNS[suite]
    seeds = sorted({r["seed"] for r in rows})
    return ("How each seed's runs shared their machine: " + "; ".join(
        f"seed {s}, {notes.get(s, 'not recorded')}" for s in seeds) +
        ". Wall time and env steps/s vary with what ran beside them.")


# Why a suite may have no results yet.
NOT_RUN = {"atari": "Atari runs on a lent GPU machine, the first call of the lend: `GPU_CHECK_PARTS=learn "
                   "bench/gpu_check.sh` ([Benchmarks](benchmarks.md))."}
# What a suite's runs do that its heading cannot say.
NOTES = {"mujoco_native": "The envs are mpirl's C++ ones (`envs/mujoco_locomotion.h`), the same MDPs as the "
                          "MuJoCo suite's `gym:` ids (`ctest -R envs.mujoco_parity`, and `ctest -R "
                          "mpi.mujoco_dump_check` for what reaches the learner); the config was tuned on that "
                          "suite's seeds 1-3, and the columns keep its split by seed number.",
         "atari": "Run on a lent GPU machine by `bench/gpu_check.sh` (part `learn`), whose call is 10 minutes: "
                  "the run stops at its wall-clock limit, so a row's env steps say where it got, short of the "
                  "budget, and its score is the last 100 episodes there. The config is Sample Factory's Atari "
                  "recipe, not tuned on this suite: seed 1 sits in the tuning column by its number only. "
                  "CleanRL's curves are a figure in its docs/rl-algorithms/ppo.md (ppo_atari); the plot draws "
                  "its 10M figure as a line."}
TUNING = (1, 2, 3)


def read(suite):
    with open(os.path.join(RESULTS, suite, "results.csv")) as f:
        rows = [{k: (num(v) if k not in ("task", "stop_reason", "error", "machine", "command") else v)
                 for k, v in r.items()} for r in csv.DictReader(f)]
    return [r for r in rows if not r.get("error")]


def env_of(task):
    if memory_cell(task):
        return "{} ({})".format(*memory_cell(task))
    sets = SUITE_TASKS[task][1]
    kw = [s.split("=", 1)[1] for s in sets if s.startswith("env.kwargs=")]
    for s in sets:
        if s.startswith("env.id="):
            return s.split("=", 1)[1].strip('"') + (f" (env.kwargs = {kw[0]})" if kw else "")
    return task


def effective_config(config):
    """configs/default.toml (every key, with the binary's defaults) under configs/CONFIG's keys."""
    with open(os.path.join(ROOT, "configs", "default.toml"), "rb") as f:
        cfg = tomllib.load(f)
    with open(os.path.join(ROOT, "configs", config), "rb") as f:
        for section, keys in tomllib.load(f).items():
            cfg.setdefault(section, {}).update(keys)
    return cfg


def overrides(command, config, task):
    """The `--set` keys of a recorded command that change the suite's config (beyond what
    bench/learning.py sets for every run: env.id, run.*, replay.dump and the task's own keys), as
    "key=value" strings: a row made before the config changed names what it ran with instead."""
    cfg = effective_config(config)
    words, out = shlex.split(command), []
    task_keys = {kv.split("=", 1)[0] for kv in SUITE_TASKS[task][1]}
    for i, w in enumerate(words[:-1]):
        if w != "--set" or "=" not in words[i + 1]:
            continue
        kv = words[i + 1]
        key, value = kv.split("=", 1)
        if key.startswith("run.") or key in ("env.id", "replay.dump") or key in task_keys:
            continue
        section, name = key.split(".", 1)
        try:
            same = tomllib.loads(f"v = {value}")["v"] == cfg.get(section, {}).get(name)
        except tomllib.TOMLDecodeError:
            same = value == cfg.get(section, {}).get(name)
        if not same:
            out.append(kv)
    return out


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
    config, sets, _, budget, _ = SUITE_TASKS[SUITES[suite][0]]
    common = [s for s in sets if not s.startswith("env.id=") and all(s in SUITE_TASKS[t][1] for t in SUITES[suite])]
    extra = " with " + ", ".join(f"`{s}`" for s in common) if common else ""
    other = [(env_of(t), SUITE_TASKS[t][3]) for t in SUITES[suite] if SUITE_TASKS[t][3] != budget]
    budgets = f"{budget:,} env steps per run" + (" (" + ", ".join(
        f"{e}: {b:,}" for e, b in other) + ", its reference's budget)" if other else "")
    out = [f"## {TITLES.get(suite, suite)}", "",
           f"`configs/{config}`{extra} for every env (only `env.id` changes), {budgets}, "
           f"`bench/learning.py --suite {suite}`." + (" " + NOTES[suite] if suite in NOTES else ""), "",
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
    changed = sorted({r["task"] for r in rows if overrides(r["command"], config, r["task"])})
    if changed:
        out += ["", "Runs of " + ", ".join(env_of(t) for t in changed) + " set keys that differ from the "
                f"config as it is now (`configs/{config}` changed after them): the table below names them; "
                "their commands reproduce them."]
    out += ["", "Every run:", "", "| env | seed | return (last 100 episodes) | steps to reference | time to reference "
            "| env steps | wall | env steps/s |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (SUITES[suite].index(r["task"]), r["seed"])):
        tts = "-" if r["time_to_threshold_s"] is None else f"{r['time_to_threshold_s']:.0f} s"
        ov = overrides(r["command"], config, r["task"])
        note = ", ".join(([] if r["seed"] in TUNING else ["held out"]) + [f"`{o}`" for o in ov])
        out.append(f"| {env_of(r['task'])} | {r['seed']}{f' ({note})' if note else ''} | "
                   f"{r['final_mean_return']:.1f} | {'-' if r['steps_to_threshold'] is None else r['steps_to_threshold']} | "
                   f"{tts} | {r['env_steps']} | {r['wall_time_s']:.0f} s | {r['sps']:.0f} |")
    machines = sorted({r["machine"] for r in rows if r.get("machine")})
    shared = seed_runs(suite, rows) if suite in SEED_RUNS else RUN_NOTES.get(
        suite, "Runs were made one to five at a time, so wall time and env steps/s vary with what ran beside them.")
    out += ["", "Machine: " + "; ".join(machines) + ". " + shared, "",
            f"![Return against env steps, every run](images/results-{suite}.png)", "",
            "The commands (also in the CSV's `command` column):", "", "```"]
    out += [r["command"] for r in sorted(rows, key=lambda r: (SUITES[suite].index(r["task"]), r["seed"]))]
    out += ["```", ""]
    return out


def memory_section(suite, rows):
    """The memory suite as a table of tasks by cores (issue 41: which core solves which task)."""
    config, _, _, budget, _ = SUITE_TASKS[SUITES[suite][0]]
    ran = {memory_cell(r["task"]) for r in rows}
    envs = [e for e in MEMORY_ENVS if any((e, c) in ran for c in MEMORY_CORES)]
    cores = [c for c in MEMORY_CORES if any((e, c) in ran for e in MEMORY_ENVS)]
    out = [f"## {TITLES.get(suite, suite)}", "",
           f"`configs/{config}` for every task and core (only `env.id` and `model.core` change), {budget:,} env "
           f"steps per run, `bench/learning.py --suite {suite}`. Returns lie in [-1, 1] (StatelessCartPole: "
           "[0, 1]); the mean return of the last 100 episodes at the budget, mean +- std over seeds.", ""]

    def grid(title, keep):
        res = ["| task | " + " | ".join(cores) + " |", "|---|" + "---|" * len(cores)]
        for e in envs:
            cells = []
            for c in cores:
                vals = [r["final_mean_return"] for r in rows if memory_cell(r["task"]) == (e, c) and keep(r["seed"])]
                cells.append("-" if not vals else f"{statistics.mean(vals):.2f}" + (
                    f" +- {statistics.stdev(vals):.2f}" if len(vals) > 1 else "") + f" ({len(vals)})")
            res.append(f"| {e} | " + " | ".join(cells) + " |")
        return [title, ""] + res + [""]

    out += grid("Seeds 1-3 (tuning), mean +- std (seeds):", lambda s: s in TUNING)
    if any(r["seed"] not in TUNING for r in rows):
        out += grid("Seeds 4-6 (held out):", lambda s: s not in TUNING)
    # Seed 1's runs ran one at a time on one machine; later seeds ran beside other runs, or on
    # another machine, so the speed table takes seed 1 alone (the table of every run has the rest).
    speed_rows = [r for r in rows if r["seed"] == 1]
    sps = [med([r for r in speed_rows if memory_cell(r["task"])[1] == c], "sps") for c in cores]
    wall = [med([r for r in speed_rows if memory_cell(r["task"])[1] == c], "wall_time_s", "{:.0f} s") for c in cores]
    out += ["Speed per core (median over seed 1's runs, on one machine):", "", "| | " + " | ".join(cores) + " |",
            "|---|" + "---|" * len(cores), "| env steps/s | " + " | ".join(sps) + " |",
            "| wall per run | " + " | ".join(wall) + " |", ""]
    missing = [f"{e} ({c})" for e in MEMORY_ENVS for c in MEMORY_CORES if (e, c) not in ran]
    if missing:
        out += ["Not run yet: " + ", ".join(missing) + ".", ""]
    out += ["Every run:", "", "| task | core | seed | return (last 100 episodes) | env steps | wall | env steps/s |",
            "|---|---|---|---|---|---|---|"]
    order = {t: i for i, t in enumerate(SUITES[suite])}
    for r in sorted(rows, key=lambda r: (order[r["task"]], r["seed"])):
        e, c = memory_cell(r["task"])
        out.append(f"| {e} | {c} | {r['seed']}{'' if r['seed'] in TUNING else ' (held out)'} | "
                   f"{r['final_mean_return']:.3f} | {r['env_steps']} | {r['wall_time_s']:.0f} s | {r['sps']:.0f} |")
    machines = sorted({r["machine"] for r in rows if r.get("machine")})
    first = min(rows, key=lambda r: (order[r["task"]], r["seed"]))
    out += ["", "Machine: " + "; ".join(machines) + ". " + seed_runs(suite, rows), "",
            f"![Return against env steps, every run](images/results-{suite}.png)", "",
            "The commands are in the CSV's `command` column; they differ only in `env.id`, `model.core`, "
            "`run.seed` and `run.name`. The first:", "", "```", first["command"], "```", ""]
    return out


def page():
    suites = [s for s in SUITES if os.path.exists(os.path.join(RESULTS, s, "results.csv"))]
    out = ["# Results", "",
           "Generated by `bench/results_page.py` from `bench/results/suites/SUITE/results.csv` and its "
           "`curves/`; `ctest -R docs.site` fails when this page is not what the script writes, so it "
           "cannot drift from the committed results (nor can the README's learning row, written from the same "
           "CSVs). Edit the CSVs (rerun the suites), never this page.", "",
           "The score is CleanRL's: the mean return over the last 100 training episodes at the budget. "
           "One config per suite, the same for every env and seed. Seeds 1-3 were used to tune it; seeds "
           "4-6 were not, and are reported apart. \"Steps/time to it\": the first metrics row whose "
           "100-episode mean reached the reference.", ""]
    for s in suites:
        out += (memory_section if s == "memory" else suite_section)(s, read(s))
    missing = [s for s in SUITES if s not in suites]
    if missing:
        out += ["## Not run yet", "", ", ".join(TITLES.get(s, s) for s in missing) + ": no committed results." +
                "".join(" " + NOT_RUN[s] for s in missing if s in NOT_RUN), ""]
    return "\n".join(out)


def plots():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for suite in SUITES:
        if not os.path.exists(os.path.join(RESULTS, suite, "results.csv")):
            continue
        rows = read(suite)
        if suite == "memory":
            memory_plot(plt, suite, rows)
            continue
        tasks = [t for t in SUITES[suite] if any(r["task"] == t for r in rows)]
        fig, axes = panel_grid(plt, len(tasks), 3, 4.2)
        for ax, t in zip(axes, tasks):
            for r in sorted((r for r in rows if r["task"] == t), key=lambda r: r["seed"]):
                c = curve(suite, t, r["seed"])
                held = r["seed"] not in TUNING
                if c:
                    ax.plot(*c, ls="--" if held else "-", lw=1, label=f"seed {r['seed']}{' (held out)' if held else ''}")
            if SUITE_TASKS[t][2] is not None:
                ax.axhline(SUITE_TASKS[t][2], color="grey", ls=":", lw=1, label="reference")
        finish(fig, axes, [env_of(t) for t in tasks], suite)


def curve(suite, task, seed):
    """(env steps, 100-episode mean returns) of one run's committed curve, or None."""
    path = os.path.join(RESULTS, suite, "curves", f"{task}-s{seed}.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        c = list(csv.DictReader(f))
    return [float(x["env_steps"]) for x in c], [float(x["mean_return"]) for x in c]


def panel_grid(plt, n, cols, width):
    """A figure of n panels, `cols` to a row (fewer when n is smaller); unused cells blank."""
    cols = min(cols, n)
    nrow = (n + cols - 1) // cols
    fig, grid = plt.subplots(nrow, cols, figsize=(width * cols, 3.2 * nrow), squeeze=False)
    for j in range(n, nrow * cols):
        grid[j // cols][j % cols].axis("off")
    return fig, [grid[i // cols][i % cols] for i in range(n)]


def finish(fig, axes, titles, suite):
    """Titles, axis labels and legends, then docs/images/results-SUITE.png."""
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("env steps")
        ax.set_ylabel("mean return (100 ep.)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    out = os.path.join(ROOT, "docs", "images", f"results-{suite}.png")
    fig.savefig(out, dpi=80)
    print(f"wrote {out}")


def memory_plot(plt, suite, rows):
    """One panel per task, a colour per core, a line per run (held-out seeds dashed)."""
    envs = [e for e in MEMORY_ENVS if any(memory_cell(r["task"])[0] == e for r in rows)]
    fig, axes = panel_grid(plt, len(envs), 4, 4.0)
    colours = dict(zip(MEMORY_CORES, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, e in zip(axes, envs):
        labelled = set()
        for r in sorted(rows, key=lambda r: (MEMORY_CORES.index(memory_cell(r["task"])[1]), r["seed"])):
            env, core = memory_cell(r["task"])
            c = curve(suite, r["task"], r["seed"]) if env == e else None
            if c:
                ax.plot(*c, color=colours[core], ls="-" if r["seed"] in TUNING else "--", lw=0.8,
                        label=None if core in labelled else core)
                labelled.add(core)
    finish(fig, axes, envs, suite)


def readme_row():
    """The README's learning row: per env, the mean over every seed (the held-out seeds' mean) and
    the reference score."""
    parts = []
    for suite, label, source in README_SUITES:
        rows = read(suite)
        cells, counts = [], set()
        for t in SUITES[suite]:
            rs = [r for r in rows if r["task"] == t]
            if not rs:
                continue
            every = [r["final_mean_return"] for r in rs]
            held = [r["final_mean_return"] for r in rs if r["seed"] not in TUNING]
            ref = SUITE_TASKS[t][2]
            f = "{:.0f}" if abs(ref if ref is not None else statistics.mean(every)) >= 100 else "{:.1f}"
            name = env_of(t).split(":")[-1].split("-")[0]
            cells.append(f"{name} {f.format(statistics.mean(every))}" +
                         (f" ({f.format(statistics.mean(held))})" if held else "") +
                         (f" against {f.format(ref)}" if ref is not None else f" (no {source} figure)"))
            counts.add(len(rs))
        seeds = f"{counts.pop()} seeds" if len(counts) == 1 else "mixed seed counts"
        parts.append(f"{label} ({seeds}): " + ", ".join(cells))
    return (f"{README_ROW}: mean over seeds (held-out seeds 4-6), one config per suite "
            "([every suite and seed](docs/results.md)) | " + "; ".join(parts) + " | 2-core VMs |")


def readme_text():
    """README.md with its learning row as this script writes it."""
    lines = open(README).read().split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(README_ROW)]
    if len(at) != 1:
        sys.exit(f"README.md has {len(at)} lines that start with '{README_ROW}' (the learning row); it needs one")
    lines[at[0]] = readme_row()
    return "\n".join(lines)


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
        if open(README).read() != readme_text():
            print("README.md's learning row is not what bench/results_page.py writes from "
                  "bench/results/suites/: run bench/results_page.py and commit README.md")
            sys.exit(1)
        print("docs/results.md and README.md's learning row match bench/results/suites/")
        return
    with open(PAGE, "w") as f:
        f.write(text)
    print(f"wrote {PAGE}")
    readme = readme_text()
    with open(README, "w") as f:
        f.write(readme)
    print(f"wrote {README} (its learning row)")
    if args.plots:
        plots()


if __name__ == "__main__":
    main()
