#!/usr/bin/env python3
"""Learning benchmark: steps and wall time to a threshold, final return, SPS and policy lag.

For each task of the suite and each seed it runs `mpirun -n RANKS mpirl train` to the task's
threshold (run.stop_mean_return) or its budget, one run at a time, and reads the run's
metrics.jsonl and summary.json. It writes, into --out:
  results.csv    one row per (task, seed)
  results.md     the per-seed table, the medians per task, the machine, the exact commands, and
                 published reference figures with their sources
  curves.png     return vs env steps and vs wall time, one panel pair per task
  curves/        TASK-sSEED.csv per run: env_steps, time_s, mean_return (100 episodes) from its
                 metrics rows, small enough to commit (bench/results/suites/, bench/results_page.py)
With --hold the runs do not stop at the threshold but go on to their budget, and the tables add
the lowest 100-episode mean after the threshold was first reached: whether a result holds (IMPALA's
clipped policy gradient let CartPole collapse to a return of 9 after solving it).
Not a test: numbers depend on the machine. Usage (bench/learning.sh wraps it):
  bench/learning.py --mpirl build/mpirl --tasks cartpole_appo acrobot --seeds 1 2 3 --out bench/out/learning
"""
import argparse
import csv
import functools
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suites import SUITE_REFERENCES, SUITE_TASKS, SUITES  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (config file under configs/ or None for the defaults, extra --set, threshold, env-step budget,
#        wall-clock limit in s). Thresholds are the targets; budgets leave room past them.
TASKS = {
    "cartpole_default": (None, [], 475, 3_000_000, 300),
    "cartpole_impala": ("cartpole.toml", [], 475, 3_000_000, 300),
    "cartpole_appo": ("cartpole_appo.toml", [], 475, 1_000_000, 300),
    "acrobot": ("acrobot.toml", [], -100, 2_000_000, 600),
    "pendulum": ("pendulum.toml", [], -250, 4_000_000, 900),
    "synthetic_default": (None, ['env.id="Synthetic"'], 190, 2_000_000, 300),
}
# Atari Breakout at a fixed budget (a CPU learner on 2 cores gets about 1k env steps/s).
TASKS["atari_breakout"] = ("atari_breakout.toml", [], None, 1_000_000, 1800)
# MinAtar, all 5 games, at a fixed budget (no threshold): configs/minatar_breakout.toml with the game swapped
# (the C++ ports, envs/minatar.h; the package's own envs are "minatar:<game>").
_MINATAR_IDS = {"breakout": "Breakout-MinAtar", "asterix": "Asterix-MinAtar", "freeway": "Freeway-MinAtar",
                "seaquest": "Seaquest-MinAtar", "space_invaders": "SpaceInvaders-MinAtar"}
for _game, _id in _MINATAR_IDS.items():
    TASKS[f"minatar_{_game}"] = ("minatar_breakout.toml", [f'env.id="{_id}"'], None, 3_000_000, 1200)

# Published figures, with where they come from. Only what the source states; "-" where it gives none.
# "read off" marks values read from a published plot (no table exists), about +-1 (+-5 for Space
# Invaders). MinAtar has no frame skip: its frames are env steps. Sources:
#   CleanRL: vwxyzjn/cleanrl docs/rl-algorithms/ppo.md @ fe8d8a03 (ppo.py, 500k steps, 3 seeds per
#            benchmark/ppo.sh); rpo.md @ 004f8a08 (ppo_continuous_action, 8M steps, 10 seeds)
#   gymnax:  RobertTLange/gymnax README.md @ 086ad956 "Ckpt (Return)" column; steps from
#            gymnax-blines @ 3f029d6b agents/<env>/ppo.yaml num_train_steps
#   MinAtar: Young & Tian 2019 (arXiv 1903.03176), kenjyoung/MinAtar img/learning_curves.gif @ 4241f246:
#            100-episode moving average, mean of 30 runs, at 5M frames
_CLEANRL_CP = "CleanRL ppo.py: 490.04 +- 6.12 at 500k steps (3 seeds); gymnax PPO ckpt: 500 at 150k steps"
_MINATAR = "MinAtar paper at 5M steps, read off the curves: DQN ~{dqn}, AC(lambda) ~{ac}; gymnax PPO ckpt at 10M: {gx}"
REFERENCES = {
    "cartpole_appo": "Sample Factory 2.1.1's CartPole example (APPO, 2 workers, CPU), measured on this machine by "
                     "the issue's author: 475 after 0.26-0.42M env steps, 24-70 s; " + _CLEANRL_CP,
    "cartpole_default": "as cartpole_appo; " + _CLEANRL_CP,
    "cartpole_impala": "as cartpole_appo; " + _CLEANRL_CP,
    "acrobot": "CleanRL ppo.py: -86.36 +- 1.32 at 500k steps (3 seeds); gymnax PPO ckpt: -80 at 500k steps",
    "pendulum": "CleanRL ppo_continuous_action: -1141.98 +- 135.55 at 8M steps (10 seeds; RPO -151.08); "
                "gymnax PPO ckpt: -130 at 1M steps",
    "synthetic_default": "optimal 200 (200 steps, reward 1 for the right one of 4 actions); chance 50",
    "atari_breakout": "Sample Factory 2 APPO, Hugging Face checkpoints: 727.20 / 724.50 / 538.75 (3 seeds) after "
                      "2B frames (frame-skip 4 counted: about 500M env steps); CleanRL/SF give no figure at 1M; "
                      "CleanRL ppo_atari_envpool_xla_jax_scan (Breakout-v5 without sticky actions), Hugging Face "
                      "card vwxyzjn/...-seed3: 457.10 +- 134.14, its budget not stated there",
    "minatar_breakout": _MINATAR.format(dqn=10, ac=17.5, gx=28),
    "minatar_asterix": _MINATAR.format(dqn=17, ac=19, gx=15),
    "minatar_freeway": _MINATAR.format(dqn=50, ac=47, gx=58),
    "minatar_seaquest": _MINATAR.format(dqn=20, ac=15, gx="none published"),
    "minatar_space_invaders": _MINATAR.format(dqn=43, ac=185, gx=131),
}
# The suites (bench/suites.py): scored at their budget, never stopped at their reference score.
assert not set(TASKS) & set(SUITE_TASKS), f"suite tasks shadow bench tasks: {set(TASKS) & set(SUITE_TASKS)}"
TASKS.update(SUITE_TASKS)
REFERENCES.update(SUITE_REFERENCES)


def first_at(rows, threshold):
    """(env_steps, time_s) of the first metrics row whose mean_return >= threshold, else (None, None)."""
    for r in rows:
        v = r.get("mean_return")
        if v is not None and threshold is not None and v >= threshold:
            return r.get("env_steps"), r.get("time_s")
    return None, None


def lowest_after(rows, threshold):
    """The lowest 100-episode mean from the first row at or above threshold to the end (None if never
    reached): a run that holds its result stays near the threshold, a collapse shows here."""
    if threshold is None:
        return None
    vals = [r["mean_return"] for r in rows if r.get("mean_return") is not None]
    first = next((i for i, v in enumerate(vals) if v >= threshold), None)
    return None if first is None else min(vals[first:])


def read_rows(run_dir):
    rows = []
    path = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def run_one(args, task, seed):
    config, sets, threshold, budget, wall = TASKS[task]
    name = f"{task}-s{seed}"
    cmd = [args.mpirun, "-n", str(args.ranks), *(args.mpirun_arg or []), "--oversubscribe", args.mpirl, "train"]
    if config:
        cmd += ["--config", os.path.join(ROOT, "configs", config)]
    over = [*sets, f"run.seed={seed}", f"run.total_env_steps={budget}", f"run.max_wall_seconds={wall}",
            f'run.out_dir="{args.out}/runs"', f'run.name="{name}"', "run.log_interval_s=0.25",
            'run.progress="lines"', 'run.checkpoint="never"', 'replay.dump="never"', "run.tensorboard=false"]
    if args.hold or task in SUITE_TASKS:
        over.append("run.stop_mean_return=nan")  # a config file's own stop too
    elif threshold is not None:
        over.append(f"run.stop_mean_return={threshold}")
    for s in over + list(args.set or []):
        cmd += ["--set", s]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    t0 = time.time()
    run_dir = os.path.join(args.out, "runs", name)
    # mpirl's output goes to a file as it comes (runs/NAME.out), so a run that fails, or a
    # benchmark killed from outside (a lend's call ending), still says what happened.
    log = os.path.join(args.out, "runs", f"{name}.out")
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        with open(log, errors="replace") as f:
            sys.stdout.write(f.read()[-4000:])
        # run_dir kept: the curve of a run that failed part way is still written (write_curves)
        return {"task": task, "seed": seed, "error": f"exit {p.returncode} (output: {log})", "run_dir": run_dir}
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    rows = read_rows(run_dir)
    steps, secs = first_at(rows, threshold)
    dec = s.get("stop_decision") or {}
    if steps is None and dec.get("reason") == "stop_mean_return":  # reached between two metrics rows
        steps, secs = dec.get("env_steps"), dec.get("time_s")
    lags = [r["policy_lag_mean"] for r in rows if r.get("policy_lag_mean") is not None]
    res = {"task": task, "seed": seed, "threshold": threshold, "steps_to_threshold": steps,
           "time_to_threshold_s": secs, "final_mean_return": s.get("final_mean_return"), "env_steps": s["env_steps"],
           "wall_time_s": s["wall_time_s"], "sps": s["sps"], "policy_lag_mean": statistics.median(lags) if lags else None,
           "lowest_after_threshold": lowest_after(rows, threshold), "hold": 1 if args.hold else 0,
           "stop_reason": s["stop_reason"], "command": " ".join(shlex.quote(c) for c in cmd),
           "run_dir": run_dir, "launcher_s": time.time() - t0, "machine": machine()}
    print(f"  {task} seed {seed}: {res['stop_reason']}, return {res['final_mean_return']}, "
          f"threshold at {steps} steps / {secs} s, {res['sps']:.0f} SPS, lag {res['policy_lag_mean']}", flush=True)
    return res


# The columns of results.csv (bench/suite_import.py and bench/results_page.py read them too).
RESULT_KEYS = ["task", "seed", "threshold", "steps_to_threshold", "time_to_threshold_s", "final_mean_return",
               "env_steps", "wall_time_s", "sps", "policy_lag_mean", "lowest_after_threshold", "hold", "stop_reason",
               "error", "machine", "command"]


def fmt(v, f="{:.0f}"):
    return "-" if v is None else f.format(v)


def median_of(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


@functools.lru_cache(maxsize=None)  # once per process: it runs nvidia-smi
def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    gpu = ""
    try:  # the GPUs a run could use (a lend's runs; nothing where nvidia-smi is absent or fails)
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30)
        lines = [l.strip() for l in names.stdout.splitlines() if l.strip()] if names.returncode == 0 else []
        gpu = f", {len(lines)} x {lines[0]}" if lines else ""
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{os.cpu_count()} cores, {cpu}{gpu}, {platform.system()} {platform.release()}"


def write_csv(out, results):
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_KEYS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow(r)


def write_outputs(args, results):
    write_curves(args.out, results)
    write_csv(args.out, results)
    # "lowest after" only means something for runs that went on past their threshold (--hold,
    # recorded per run in results.csv so that --report keeps it).
    hold = bool(args.hold) or any(r.get("hold") for r in results)
    low_h, low_sep = (" lowest after |", "---|") if hold else ("", "")
    note = (" --hold: every run went on past its threshold to its budget; \"lowest after\" is the lowest "
            "100-episode mean from the first at or above the threshold on (a collapse shows there).") if hold else ""
    lines = [f"# mpirl learning benchmark ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Machine: {machine()}; {args.ranks} MPI ranks (1 learner, 1 replay, with central inference 1 "
             f"inference rank, the rest actors), one run at a time." + note, "", "Per seed:", "",
             "| task | seed | threshold | steps to threshold | time to threshold (s) | final return | env steps | "
             "wall (s) | SPS | policy lag (median) |" + low_h + " stop |",
             "|---|---|---|---|---|---|---|---|---|---|" + low_sep + "---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['task']} | {r['seed']} | failed: {r['error']} ||||||||" + ("||" if hold else "|"))
            continue
        low = f" {fmt(r.get('lowest_after_threshold'), '{:.1f}')} |" if hold else ""
        lines.append(f"| {r['task']} | {r['seed']} | {fmt(r['threshold'], '{}')} | {fmt(r['steps_to_threshold'])} | "
                     f"{fmt(r['time_to_threshold_s'], '{:.1f}')} | {fmt(r['final_mean_return'], '{:.1f}')} | "
                     f"{r['env_steps']} | {r['wall_time_s']:.1f} | {r['sps']:.0f} | "
                     f"{fmt(r['policy_lag_mean'], '{:.1f}')} |{low} {r['stop_reason']} |")
    lines += ["", "Medians per task (steps/time to threshold over the seeds that reached it; n/N reached):", "",
              "| task | reached | steps to threshold | time to threshold (s) | final return |" + low_h +
              " SPS | lag | reference |", "|---|---|---|---|---|" + low_sep + "---|---|---|"]
    for task in dict.fromkeys(r["task"] for r in results):
        rs = [r for r in results if r["task"] == task and "error" not in r]
        reached = sum(1 for r in rs if r["steps_to_threshold"] is not None)
        reached = f"{reached}/{len(rs)}" if TASKS[task][2] is not None else f"budget ({len(rs)} runs)"
        low = f" {fmt(median_of(rs, 'lowest_after_threshold'), '{:.1f}')} |" if hold else ""
        lines.append(f"| {task} | {reached} | {fmt(median_of(rs, 'steps_to_threshold'))} | "
                     f"{fmt(median_of(rs, 'time_to_threshold_s'), '{:.1f}')} | "
                     f"{fmt(median_of(rs, 'final_mean_return'), '{:.1f}')} |{low} {fmt(median_of(rs, 'sps'))} | "
                     f"{fmt(median_of(rs, 'policy_lag_mean'), '{:.1f}')} | {REFERENCES.get(task, '-')} |")
    lines += ["", "Commands:", ""] + [f"    {r['command']}" for r in results if "command" in r]
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:]))
    plot(args, results)


def write_curves(out, results):
    """OUT/curves/TASK-sSEED.csv for each run whose metrics are there (kept where they are not)."""
    os.makedirs(os.path.join(out, "curves"), exist_ok=True)
    for r in results:
        rows = [x for x in read_rows(r.get("run_dir", "")) if x.get("mean_return") is not None]
        if not rows:
            continue
        with open(os.path.join(out, "curves", f"{r['task']}-s{r['seed']}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["env_steps", "time_s", "mean_return"])
            for x in rows:
                w.writerow([x["env_steps"], round(x.get("time_s", 0), 2), round(x["mean_return"], 3)])


def plot(args, results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no curves.png")
        return
    tasks = list(dict.fromkeys(r["task"] for r in results))
    if len(tasks) > 12:  # a panel pair per task would make a figure metres tall
        print(f"{len(tasks)} tasks: no curves.png (curves/ has every run; bench/results_page.py --plots draws suites)")
        return
    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 3.2 * len(tasks)), squeeze=False)
    for i, task in enumerate(tasks):
        for r in (r for r in results if r["task"] == task and "error" not in r):
            rows = [x for x in read_rows(r["run_dir"]) if x.get("mean_return") is not None]
            steps = [x["env_steps"] for x in rows]
            secs = [x["time_s"] for x in rows]
            ret = [x["mean_return"] for x in rows]
            axes[i][0].plot(steps, ret, label=f"seed {r['seed']}")
            axes[i][1].plot(secs, ret, label=f"seed {r['seed']}")
        thr = TASKS[task][2]
        for j, xl in enumerate(("env steps", "wall time (s)")):
            ax = axes[i][j]
            if thr is not None:
                ax.axhline(thr, color="grey", ls="--", lw=0.8)
            ax.set_xlabel(xl)
            ax.set_ylabel("mean return (100 ep.)")
            ax.set_title(task)
            ax.legend(fontsize=7)
    fig.tight_layout()
    out = os.path.join(args.out, "curves.png")
    fig.savefig(out, dpi=80)
    print(f"curves: {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpirl", default=os.path.join(ROOT, "build", "mpirl"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpirun-arg", action="append", help="an mpirun option for every run (repeat for more), "
                    "e.g. --mpirun-arg=--bind-to --mpirun-arg=none")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--tasks", nargs="+", default=["cartpole_default", "cartpole_appo", "acrobot", "synthetic_default"],
                    choices=sorted(TASKS))
    ap.add_argument("--suite", choices=sorted(SUITES),
                    help="every task of a suite (bench/suites.py), instead of --tasks")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--set", nargs="*", help="extra --set overrides for every run")
    ap.add_argument("--hold", action="store_true",
                    help="no stop on the threshold: every run goes on to its budget (raise it with --set "
                         "run.total_env_steps=..., and the task's wall-clock limit with run.max_wall_seconds=...), "
                         "and the tables add the lowest mean after the threshold")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: rewrite results.md and curves.png from --out's results.csv and runs/")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "learning-" + time.strftime("%Y%m%d-%H%M%S")))
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    if args.report:
        return write_outputs(args, read_results(args.out))
    if args.suite:
        args.tasks = SUITES[args.suite]
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    results = []
    for t in args.tasks:
        for s in args.seeds:
            results.append(run_one(args, t, s))
            write_csv(args.out, results)  # after every run: a long suite that stops keeps what it ran
    write_outputs(args, results)


def num(v):
    """A results.csv field as int, float or None (empty)."""
    if v in ("", None):
        return None
    try:
        return int(v)
    except ValueError:
        return float(v)


def read_results(out):
    """The results of an earlier invocation, from OUT/results.csv (empty fields are None)."""
    results = []
    with open(os.path.join(out, "results.csv")) as f:
        for r in csv.DictReader(f):
            r = {k: v for k, v in r.items() if not (k == "error" and v == "")}  # "error" marks a failed run
            for k in ("seed", "threshold", "steps_to_threshold", "time_to_threshold_s", "final_mean_return",
                      "env_steps", "wall_time_s", "sps", "policy_lag_mean", "lowest_after_threshold", "hold"):
                if k in r:
                    r[k] = num(r[k])
            r["run_dir"] = os.path.join(out, "runs", f"{r['task']}-s{r['seed']}")
            results.append(r)
    return results


if __name__ == "__main__":
    main()
