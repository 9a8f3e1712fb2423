#!/usr/bin/env python3
"""The node-scaling throughput study: how many env steps per second does mpirl deliver with N
nodes, A actor ranks per node and an env that costs d per step?

    slurm/study.py --local [--nodes 1] [--actors 8,32] [--step-ms 0.1,1,10,100] [--seconds 15]
                   [--out runs/study]
    slurm/study.py --cluster --nodes 1,2,4,8 [--actors 32] [--partition P] [--learner-node own|shared] ...

--cluster submits one `sbatch --wait slurm/train.sbatch` job per point (run it on a login node,
from the repository, with --out on a shared file system): N actor nodes with A actor ranks each,
plus one node for the learner and the replay (--learner-node own, the default) or with the learner
and replay on the first actor node (shared). The env-only column is measured by one one-node job
per point (A bench_actor_ceiling processes, times N: the nodes are alike). Jobs run one at a time.

--local runs every point on this machine with mpirun (nodes are emulated by ranks on it). Each
point runs the Synthetic env in sleep mode (16 envs per actor rank, a simulator that leaves the
CPU free) twice, for the same number of seconds:
  * mpirl end to end: mpirun -n A*N+2 mpirl train (1 learner, 1 replay, A*N actors, learning on);
  * env-only: the same A*N actors stepping the same emulated cost with local inference, no MPI and
    no learning (build/bench_actor_ceiling), so the accuracy of the emulated cost (a 100 us sleep
    takes longer than 100 us) is separated from mpirl's overhead.
SPS is read over the steady state (metrics rows after the first), not start-up and shutdown.

Columns as in Tianshou #1172 -- nodes, cores (actor ranks), step duration, SPS, SPS/core, ideal SPS
(= cores / step duration), efficiency (SPS / ideal) -- plus env-only SPS and the efficiency against
it. Writes study.csv, study.md and study.png into --out.
"""
import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
NUM_ENVS = 16
# The one Ray figure quoted in our issue from Tianshou #1172 (RayVecEnv, 48-core nodes).
RAY_QUOTED = [{"cores": 96, "step_ms": 1.0, "efficiency": 0.04}]


def workload(step_ms, seconds):
    """--set pairs of one point. A rollout must take well under the run, or the partial rollouts
    lost at the stop would dominate: T steps x 16 envs x d <= seconds / 10."""
    d = step_ms / 1000.0
    T = max(1, min(32, int(seconds / (10 * NUM_ENVS * d))))
    return ["env.id=\"Synthetic\"", f"env.step_cost_us={step_ms * 1000.0}", "env.cost_mode=\"sleep\"",
            f"env.num_envs={NUM_ENVS}", f"actor.rollout_len={T}"], T


def env_only(args, cores, sets):
    procs = []
    for i in range(cores):
        cmd = [args.ceiling, "--seconds", str(args.seconds), "--stream", str(i + 1)]
        for s in sets:
            cmd += ["--set", s]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    total = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=args.seconds * 4 + 60)
        if p.returncode != 0:
            raise SystemExit(f"bench_actor_ceiling failed ({p.returncode})")
        total += json.loads(out.strip().splitlines()[-1])["sps"]
    return total


def mpirl_run(args, cores, sets, work):
    run_dir = os.path.join(work, f"c{cores}")
    cmd = [args.mpirun, "-n", str(cores + 2), "--oversubscribe", args.mpirl, "train",
           "--set", f"run.out_dir={json.dumps(work)}", "--set", f"run.name=\"c{cores}\"",
           "--set", f"run.max_wall_seconds={args.seconds}", "--set", "run.total_env_steps=1000000000000",
           "--set", "run.log_interval_s=1.0"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=args.seconds * 4 + 120)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-2000:] + p.stderr[-2000:])
        raise SystemExit(f"mpirl run failed ({p.returncode}): {' '.join(cmd)}")
    return read_sps(run_dir)


def sbatch_wait(args, cmd, what):
    """Runs `sbatch --wait ...`; returns the job id. Exits naming the job and its log on failure."""
    full = ["sbatch", "--parsable", "--wait", *cmd]
    p = subprocess.run(full, capture_output=True, text=True, cwd=ROOT)
    job = p.stdout.strip().split(";")[0] if p.stdout.strip() else "?"
    if p.returncode != 0:
        raise SystemExit(f"{what}: job {job} failed ({p.returncode}): {' '.join(full)}\n{p.stderr[-2000:]}")
    return job


def cluster_env_only(args, nodes, actors, sets, work):
    out = os.path.join(work, f"ceiling-a{actors}.json")
    cmd = [f"--job-name=mpirl-study-ceiling", "--nodes=1", f"--time={int(args.seconds * 4 / 60) + 5}",
           f"--output={out}"] + (["--partition", args.partition] if args.partition else [])
    inner = [sys.executable, os.path.abspath(__file__), "--ceiling-only", str(actors), "--seconds", str(args.seconds),
             "--ceiling", args.ceiling] + [x for s in sets for x in ("--set", s)]
    sbatch_wait(args, cmd + ["--wrap", " ".join(json.dumps(x) if " " in x or '"' in x else x for x in inner)],
                "env-only point")
    # The job's output may hold Slurm's own messages too: the last line that is our JSON counts.
    for line in reversed(open(out).read().splitlines()):
        try:
            return json.loads(line)["sps"] * nodes
        except (ValueError, KeyError, TypeError):
            continue
    raise SystemExit(f"env-only point: no result line in {out}")


def cluster_mpirl(args, nodes, actors, sets, work):
    name = f"n{nodes}-a{actors}"
    job_nodes = nodes + (1 if args.learner_node == "own" else 0)
    cmd = [f"--job-name=mpirl-study", f"--nodes={job_nodes}", f"--time={int(args.seconds * 4 / 60) + 5}",
           f"--output={os.path.join(work, name + '.out')}",
           f"--export=ALL,MPIRL_BIN={args.mpirl},MPIRL_ACTORS_PER_NODE={actors}"]
    cmd += ["--partition", args.partition] if args.partition else []
    train = ["--set", f"run.out_dir={json.dumps(work)}", "--set", f"run.name=\"{name}\"",
             "--set", f"run.max_wall_seconds={args.seconds}", "--set", "run.total_env_steps=1000000000000",
             "--set", "run.log_interval_s=1.0", "--set", "run.checkpoint=\"never\"", "--set", "replay.dump=\"never\""]
    for s in sets:
        train += ["--set", s]
    sbatch_wait(args, cmd + [os.path.join(ROOT, "slurm", "train.sbatch")] + train, "mpirl point")
    return read_sps(os.path.join(work, name))


def read_sps(run_dir):
    """SPS over the steady state (metrics rows after the first) and the mean policy lag."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    steady = [r for r in rows[1:] if r["env_steps"] > 0]
    if len(steady) >= 2 and steady[-1]["time_s"] > steady[0]["time_s"]:
        sps = (steady[-1]["env_steps"] - steady[0]["env_steps"]) / (steady[-1]["time_s"] - steady[0]["time_s"])
    else:  # too few rows (very slow envs): the whole run
        sps = s["sps"]
    shutil.rmtree(run_dir, ignore_errors=True)
    return sps, s.get("policy_lag_mean", 0.0)


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {os.cpu_count()} cores, {cpu}"


def write_outputs(rows, out, machine_line, how, note=""):
    os.makedirs(out, exist_ok=True)
    cols = ["nodes", "cores", "step_ms", "sps", "sps_per_core", "ideal_sps", "efficiency", "env_only_sps",
            "efficiency_vs_env_only", "policy_lag_mean", "rollout_len"]
    with open(os.path.join(out, "study.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out, "study.md"), "w") as f:
        f.write(f"Machine: {machine_line}. Synthetic env, sleep mode, {NUM_ENVS} envs per actor rank; {how}.\n\n")
        if note:
            f.write(f"**Note:** {note}\n\n")
        f.write("| nodes | cores (actor ranks) | step | SPS | SPS/core | ideal SPS | efficiency | env-only SPS | "
                "efficiency vs env-only | policy lag |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['nodes']} | {r['cores']} | {r['step_ms']:g} ms | {r['sps']:.0f} | {r['sps_per_core']:.0f} | "
                    f"{r['ideal_sps']:.0f} | {100 * r['efficiency']:.1f}% | {r['env_only_sps']:.0f} | "
                    f"{100 * r['efficiency_vs_env_only']:.1f}% | {r['policy_lag_mean']:.1f} |\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for step in sorted({r["step_ms"] for r in rows}):
        pts = sorted((r for r in rows if r["step_ms"] == step), key=lambda r: r["cores"])
        line, = ax.plot([r["cores"] for r in pts], [100 * r["efficiency"] for r in pts], "o-",
                        label=f"mpirl, {step:g} ms (vs ideal)")
        ax.plot([r["cores"] for r in pts], [100 * r["efficiency_vs_env_only"] for r in pts], "s--",
                color=line.get_color(), alpha=0.6, label=f"mpirl, {step:g} ms (vs env-only)")
    for r in RAY_QUOTED:
        ax.plot([r["cores"]], [100 * r["efficiency"]], "kx", markersize=10,
                label=f"Ray (Tianshou #1172), {r['step_ms']:g} ms")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("cores (actor ranks)")
    ax.set_ylabel("efficiency (%)")
    ax.set_ylim(0, 110)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"mpirl scaling, {machine_line.split(':')[0]}" + (f"\n{note}" if note else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "study.png"), dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--local", action="store_true", help="run every point on this machine with mpirun")
    mode.add_argument("--cluster", action="store_true", help="one sbatch job per point (slurm/train.sbatch)")
    mode.add_argument("--ceiling-only", type=int, metavar="A", help=argparse.SUPPRESS)  # inside a cluster job
    ap.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    ap.add_argument("--partition", default="", help="--cluster: the Slurm partition")
    ap.add_argument("--learner-node", choices=("own", "shared"), default="own",
                    help="--cluster: learner + replay on a node of their own, or on the first actor node")
    ap.add_argument("--nodes", default="1", help="node counts (--local: emulated by ranks on this machine)")
    ap.add_argument("--actors", default="8,32", help="actor ranks per node")
    ap.add_argument("--step-ms", default="0.1,1,10,100", help="env step durations in milliseconds")
    ap.add_argument("--seconds", type=float, default=15.0, help="length of each run")
    ap.add_argument("--out", default="runs/study")
    ap.add_argument("--note", default="", help="a caveat written into study.md and the plot's title (e.g. that "
                                                 "emulated nodes share one machine's cores)")
    ap.add_argument("--mpirl", default=os.path.join(ROOT, "build", "mpirl"))
    ap.add_argument("--ceiling", default=os.path.join(ROOT, "build", "bench_actor_ceiling"))
    ap.add_argument("--mpirun", default="mpirun")
    args = ap.parse_args()
    if args.ceiling_only:
        print(json.dumps({"sps": env_only(args, args.ceiling_only, args.set)}))
        return
    for exe in (args.mpirl, args.ceiling):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"{exe} not found: build first (scripts/build.sh)")
    nodes = [int(x) for x in args.nodes.split(",")]
    actors = [int(x) for x in args.actors.split(",")]
    steps = [float(x) for x in args.step_ms.split(",")]
    machine_line = machine()
    print(f"machine: {machine_line}", flush=True)
    rows = []
    os.makedirs(args.out, exist_ok=True)
    # Cluster jobs write where every node sees it (under --out); local runs use a temporary directory.
    work = tempfile.mkdtemp(prefix="work-", dir=os.path.abspath(args.out)) if args.cluster else tempfile.mkdtemp(prefix="mpirl-study-")
    try:
        for n in nodes:
            for a in actors:
                cores = n * a
                for step in steps:
                    sets, T = workload(step, args.seconds)
                    if args.cluster:
                        base = cluster_env_only(args, n, a, sets, work)
                        sps, lag = cluster_mpirl(args, n, a, sets, work)
                    else:
                        base = env_only(args, cores, sets)
                        sps, lag = mpirl_run(args, cores, sets, work)
                    ideal = cores / (step / 1000.0)
                    r = {"nodes": n, "cores": cores, "step_ms": step, "sps": sps, "sps_per_core": sps / cores,
                         "ideal_sps": ideal, "efficiency": sps / ideal, "env_only_sps": base,
                         "efficiency_vs_env_only": sps / base if base > 0 else 0.0, "policy_lag_mean": lag,
                         "rollout_len": T}
                    rows.append(r)
                    print(f"nodes {n} cores {cores} step {step:g} ms: {sps:.0f} SPS, {100 * r['efficiency']:.1f}% "
                          f"of ideal, {100 * r['efficiency_vs_env_only']:.1f}% of env-only ({base:.0f} SPS), "
                          f"lag {lag:.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.cluster:
        machine_line = f"Slurm cluster (jobs from {machine_line}; learner node: {args.learner_node})"
    how = ("one sbatch job per point (`slurm/study.py --cluster`)" if args.cluster
           else "nodes emulated by ranks on this machine (`slurm/study.py --local`)")
    write_outputs(rows, args.out, machine_line, how, args.note)
    print(f"wrote {args.out}/study.csv, study.md, study.png")


if __name__ == "__main__":
    main()
