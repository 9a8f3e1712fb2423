#!/usr/bin/env python3
"""Capacity model of an mpirl job (issue 31, item 4): from measured per-component costs, the env
steps per second (SPS) a job can deliver and the component that limits it first.

    bench/capacity_model.py calibrate [--build build] [--out FILE]   measure the costs on this machine
    bench/capacity_model.py measure   [--out FILE] [--nodes]          run the validation jobs here (mpirl
                                                                    train; --nodes: also on 2-3 namespace
                                                                    nodes, scripts/cluster-local.sh, root)
    bench/capacity_model.py validate  --costs FILE --points FILE     prediction beside measurement
    bench/capacity_model.py table     [--costs FILE]                 1, 10, 100, 1,000 nodes, K = 1 and K = N

The model (one rank per core; L learners and K replay shards take ranks, the rest act):
  actors   A x 1e6 / (d_wall + o)             d_wall: the env's wall time per step (a sleeping
                                              simulator oversleeps by the measured eps), o: the
                                              actor's own CPU per step (policy + bookkeeping)
  cpu      N x C x 1e6 / (d_cpu + o + l + r)  every core of the job: the env's CPU per step (0 when
                                              it sleeps), o, the learners' CPU per step (l = 1e6 /
                                              learner samples/s on the CPU, x samples_per_insert;
                                              0 with a GPU learner) and the replay's (r = bytes /
                                              ingest rate); the binding bound on an oversubscribed host
  learner  L x lambda / spi                   lambda: one learner's samples/s (steps), GPU or CPU
  replay   K x ingest / b                     b: bytes per env step of a stored item
  network  K = 1: link / (b x f_off) into the replay's node (f_off: the share of actors off it), and
           out of it b x spi x (L-1)/L to the learners on other nodes;
           K = N: shards on the actors' nodes, the L learners pull b x spi x f_off / L each;
           plus 2 x params x publishes per step out of learner 0 (a pipelined broadcast sends each
           byte about twice from the root)
SPS = the smallest bound, and that bound names the first bottleneck. What the model leaves out,
and where its error comes from, is in docs/SCALING.md section 6.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Costs recorded elsewhere (not measurable on a machine without a GPU); each names its source.
ON_RECORD = {
    "gpu_learner_mlp_sps": {"value": 16.49e6, "source": "docs/benchmarks.md: H100, bench_learner --T 32 --B 256, MLP, CUDA graph"},
    "gpu_learner_atari_sps": {
        "value": 1238016 / 7.0,
        "source": "bench/results/h100-2026-11-26-gpu_check.txt: Breakout, 1,238,016 steps trained while the "
                  "learner was busy 7 of 101 s (it waited for batches 94 s): a lower bound"},
    "link_Bps": {"value": 12.5e9, "source": "a 100 Gb/s node link (assumed cluster, not measured here)"},
}


def run_json(cmd, key=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return rows if key is None else rows[-1][key]


def ceiling(build, sets, seconds, env_only=False):
    cmd = [os.path.join(build, "bench_actor_ceiling"), "--seconds", str(seconds)]
    if env_only:
        cmd.append("--env-only")
    for s in sets:
        cmd += ["--set", s]
    return run_json(cmd, "sps")


def calibrate(args):
    b, s = args.build, args.seconds
    syn = ['env.id="Synthetic"', "env.num_envs=16", "actor.rollout_len=32"]
    c = {"machine": f"{platform.node()} {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
    # The actor's own CPU per step (Synthetic env, no cost: the policy and the bookkeeping).
    c["synthetic_o_us"] = 1e6 / ceiling(b, syn + ["env.step_cost_us=0"], s)
    # A sleeping simulator oversleeps: eps from one 1 ms point (the others are predictions).
    sps = ceiling(b, syn + ["env.step_cost_us=1000", 'env.cost_mode="sleep"'], s)
    c["sleep_eps_us"] = 1e6 / sps - 1000 - c["synthetic_o_us"]
    # Learners on the CPU, per env step, at the batch the jobs use.
    c["cpu_learner_mlp_sps"] = run_json([os.path.join(b, "bench_learner"), "--device", "cpu", "--policy", "mlp",
                                         "--T", "32", "--B", "32", "--modes", "eager", "--seconds", str(s)],
                                        "samples_per_s")
    # Real envs: their own step (env-only) and with the policy (local inference on this CPU).
    for name, sets in (("cartpole", ['env.id="CartPole-v1"', "env.num_envs=16"]),
                       ("minatar", ['env.id="minatar:breakout"', "env.num_envs=16"]),
                       ("atari", ['env.id="ale:breakout"', "env.num_envs=8"])):
        try:
            env_sps = ceiling(b, sets, s, env_only=True)
            both = ceiling(b, sets, s)
        except SystemExit as e:
            print(f"{name}: not measured ({e})", file=sys.stderr)
            continue
        c[f"{name}_env_us"] = 1e6 / env_sps
        c[f"{name}_policy_us"] = max(0.0, 1e6 / both - 1e6 / env_sps)
    c["replay_ingest_Bps"] = 2.97e9  # docs/SCALING.md section 1: bench_replay_ingest, shared memory, this VM
    c["on_record"] = ON_RECORD
    # What the components above leave out (the replay's message handling, MPI progress, the
    # learner's batch staging, the actors' sends), per env step: one CPU-bound job (2 actors, an env
    # that costs nothing) whose CPU per step exceeds o + l + r by this much.
    work = os.path.join(ROOT, "build", "capacity-runs")
    os.makedirs(work, exist_ok=True)
    cmd = [args.mpirun, "--oversubscribe", "-n", "4", os.path.join(b, "mpirl"), "train",
           "--set", f"run.out_dir={json.dumps(work)}", "--set", 'run.name="calibrate"', "--set",
           f"run.max_wall_seconds={max(10.0, s)}", "--set", "run.total_env_steps=1000000000000", "--set",
           "run.log_interval_s=1.0", "--set", 'run.checkpoint="never"', "--set", 'replay.dump="never"', *(
               x for kv in syn + ["env.step_cost_us=0"] for x in ("--set", kv))]
    subprocess.run(["rm", "-rf", os.path.join(work, "calibrate")])
    p = subprocess.run(cmd, env=MPI_ENV, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"calibration job failed ({p.returncode}): {p.stderr[-2000:]}")
    sps = steady_sps(os.path.join(work, "calibrate"))
    c["calibration_job_sps"] = sps
    known = c["synthetic_o_us"] + 1e6 / c["cpu_learner_mlp_sps"] + 1e6 * STEP_BYTES["synthetic"] / c["replay_ingest_Bps"]
    c["framework_us"] = max(0.0, c["cores"] * 1e6 / sps - known)
    text = json.dumps(c, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


# Bytes per env step of a stored item (obs + the per-step fields; docs/SCALING.md's layouts).
STEP_BYTES = {"synthetic": 64 * 4 + 40, "cartpole": 4 * 4 + 40, "minatar": 10 * 10 * 4 + 40, "atari": 4 * 84 * 84 + 40,
              "sim10ms": 64 * 4 + 40}
PARAM_BYTES = {"synthetic": 4 * 20e3, "cartpole": 4 * 20e3, "minatar": 4 * 0.4e6, "atari": 4 * 1.7e6, "sim10ms": 4 * 20e3}


def predict(p, c):
    """p: a configuration (nodes, cores, learners, shards, env, d_us, sleep, gpu, spi, T, B, publish_interval;
    "costs": measured costs of that machine that replace these)."""
    if p.get("costs"):
        c = dict(c, **p["costs"])
    N, C, L, K = p["nodes"], p["cores"], p["learners"], p["shards"]
    A = p.get("actors", N * C - L - K)
    env = p["env"]
    if env in ("synthetic", "sim10ms"):
        o, d = c["synthetic_o_us"], p["d_us"]
    else:
        o, d = c[f"{env}_policy_us"], c[f"{env}_env_us"]
    sleep = p.get("sleep", env in ("synthetic", "sim10ms"))
    d_wall = d + (c["sleep_eps_us"] if sleep and d > 0 else 0.0)
    d_cpu = 0.0 if sleep else d
    spi = p.get("spi", 1.0)
    lam = (c["on_record"]["gpu_learner_atari_sps"]["value"] if env == "atari" else c["on_record"]["gpu_learner_mlp_sps"]["value"]) \
        if p.get("gpu") else c["cpu_learner_mlp_sps"]
    l_cpu = 0.0 if p.get("gpu") else 1e6 / lam * spi
    b = STEP_BYTES[env]
    r_cpu = 1e6 * b / c["replay_ingest_Bps"]
    link = p.get("link_Bps", c["on_record"]["link_Bps"]["value"])
    cores = p.get("total_cores", N * C)  # namespace nodes on one machine share its cores
    m_cpu = c.get("framework_us", 0.0)
    bounds = {
        "actors": A * 1e6 / (d_wall + o),
        "cpu": cores * 1e6 / (d_cpu + o + l_cpu + r_cpu + m_cpu),
        "learner": L * lam / spi,
        "replay": K * c["replay_ingest_Bps"] / b,
    }
    if N > 1:
        f_off = (N - 1) / N  # actors off a given node
        T, B, pi = p.get("T", 32), p.get("B", 32), p.get("publish_interval", 1)
        # Bytes per env step out of learner 0's link: one publish per pi updates of L x B sequences.
        bcast = 2 * PARAM_BYTES[env] * spi / (T * B * L * pi)
        if K == 1:  # every off-node actor sends into the replay's node; off-node learners pull out of it
            per_step_in = b * f_off
            per_step_out = b * spi * (L - 1) / max(L, 1) + bcast
        else:  # shards on the actors' nodes: ingest stays on the node; L learners pull their shares
            per_step_in = b * spi * f_off / L
            per_step_out = bcast
        bounds["network"] = link / max(per_step_in, per_step_out)
    name = min(bounds, key=bounds.get)
    return bounds[name], name, bounds


MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def steady_sps(run_dir):
    """SPS over the steady state: metrics rows after the first (start-up and the stop left out)."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    steady = [r for r in rows[1:] if r["env_steps"] > 0]
    if len(steady) < 2:
        raise SystemExit(f"{run_dir}: fewer than 3 metrics rows")
    return (steady[-1]["env_steps"] - steady[0]["env_steps"]) / (steady[-1]["time_s"] - steady[0]["time_s"])


def measure(args):
    """Validation jobs: the Synthetic env sleeping d per step (a simulator that leaves the CPU
    free), 16 envs per actor, default algorithm (IMPALA queue: each step trained once), learner on
    the CPU; each runs --seconds and its steady-state SPS is recorded with the configuration."""
    mpirl = os.path.join(args.build, "mpirl")
    work = args.work
    os.makedirs(work, exist_ok=True)
    points = []
    cores = os.cpu_count()

    def job(label, launcher, n, d_us, actors, shards, nodes, extra=(), sleep=True):
        T = max(1, min(32, int(args.seconds / (10 * 16 * d_us / 1e6)))) if d_us > 0 else 32
        name = f"p{len(points)}"
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)  # a previous measurement's run
        cmd = launcher + [mpirl, "train", "--set", f"run.out_dir={json.dumps(work)}", "--set", f'run.name="{name}"',
                          "--set", f"run.max_wall_seconds={args.seconds}", "--set", "run.total_env_steps=1000000000000",
                          "--set", "run.log_interval_s=1.0", "--set", 'run.checkpoint="never"', "--set",
                          'replay.dump="never"', "--set", 'env.id="Synthetic"', "--set", f"env.step_cost_us={d_us}",
                          "--set", f'env.cost_mode="{"sleep" if sleep else "busy"}"', "--set", "env.num_envs=16",
                          "--set", f"actor.rollout_len={T}",
                          "--set", f"roles.replays={shards}", *extra]
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=MPI_ENV, capture_output=True, text=True, timeout=args.seconds * 4 + 120)
        if p.returncode != 0:
            raise SystemExit(f"{label}: failed ({p.returncode})\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        sps = steady_sps(os.path.join(work, name))
        pt = {"label": label, "nodes": nodes, "cores": cores, "total_cores": cores, "learners": 1, "shards": shards,
              "actors": actors, "env": "synthetic", "d_us": d_us, "sleep": sleep, "gpu": False, "spi": 1.0, "T": T,
              "B": 32, "measured_sps": sps}
        print(f"{label}: {sps:.0f} SPS", flush=True)
        points.append(pt)

    local = [args.mpirun, "--oversubscribe", "-n"]
    for d in (100, 1000, 10000):
        for a in (2, 6):
            job(f"1 host, {a} actors, d = {d / 1000:g} ms", local + [str(a + 2)], a + 2, d, a, 1, 1)
    job("1 host, 4 actors, 2 shards, d = 1 ms", local + ["7"], 7, 1000, 4, 2, 1)  # 1 learner + 2 shards + 4 actors
    # CPU-bound: an env that costs nothing (env.step_cost_us = 0 spins for 0 us).
    job("1 host, 6 actors, d = 0 (CPU-bound)", local + ["8"], 8, 0, 6, 1, 1, sleep=False)
    if args.nodes:
        script = os.path.join(ROOT, "scripts", "cluster-local.sh")
        subprocess.run(["bash", script, "down"], capture_output=True)
        up = subprocess.run(["bash", script, "up", "3"], capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            raise SystemExit(f"cluster-local.sh up 3 failed: {up.stderr[-2000:]}")
        try:
            def on(hosts, n):
                return ["bash", script, "exec", "n1", args.mpirun, "--host", hosts, "--oversubscribe", "-n", str(n)]
            job("2 namespace nodes, 3 actors, d = 1 ms", on("n1:2,n2:3", 5), 5, 1000, 3, 1, 2)
            job("3 namespace nodes, 4 actors, d = 1 ms", on("n1:2,n2:2,n3:2", 6), 6, 1000, 4, 1, 3)
            job("3 namespace nodes, 4 actors, d = 0.1 ms", on("n1:2,n2:2,n3:2", 6), 6, 100, 4, 1, 3)
            job("3 namespace nodes, 3 actors, 2 shards, d = 1 ms", on("n1:2,n2:2,n3:2", 6), 6, 1000, 3, 2, 3)
            job("3 namespace nodes, 4 actors, d = 0 (CPU-bound)", on("n1:2,n2:2,n3:2", 6), 6, 0, 4, 1, 3, sleep=False)
        finally:
            subprocess.run(["bash", script, "down"], capture_output=True)
    with open(args.out, "w") as f:
        for p in points:
            f.write(json.dumps(p) + "\n")
    print(f"{len(points)} points -> {args.out}")


def validate(args):
    with open(args.costs) as f:
        c = json.load(f)
    with open(args.points) as f:
        points = [json.loads(l) for l in f if l.strip()]
    print("| config | measured SPS | predicted SPS | bound | error |")
    print("|---|---:|---:|---|---:|")
    worst = 0.0
    for p in points:
        sps, name, _ = predict(p, c)
        err = (sps - p["measured_sps"]) / p["measured_sps"]
        worst = max(worst, abs(err))
        print(f"| {p['label']} | {p['measured_sps']:.0f} | {sps:.0f} | {name} | {100 * err:+.1f}% |")
    print(f"\nlargest error {100 * worst:.1f}% over {len(points)} configurations")


def table(args):
    c = {}
    if args.costs:
        with open(args.costs) as f:
            c = json.load(f)
    C = args.cores
    print(f"Cluster: {C} cores per node, one GPU learner per 10 nodes (at least 1; their all-reduce assumed "
          f"free: not measured), {ON_RECORD['link_Bps']['value'] / 1e9:.1f} GB/s links, on-policy (each step "
          f"trained once), local inference on the actors' CPUs\n")
    for env, label in (("cartpole", "CartPole"), ("minatar", "MinAtar Breakout"), ("atari", "Atari Breakout"),
                       ("sim10ms", "10 ms simulator (sleeping)")):
        if env != "sim10ms" and f"{env}_env_us" not in c:
            continue
        print(f"{label}:\n")
        print("| nodes | GPU learners | K | SPS | first bottleneck | next |")
        print("|---:|---:|---:|---:|---|---|")
        for N in (1, 10, 100, 1000):
            L = max(1, N // 10)
            for K in sorted({1, N}):
                p = {"nodes": N, "cores": C, "learners": L, "shards": K, "env": env, "d_us": 10000, "gpu": True, "spi": 1.0}
                sps, name, bounds = predict(p, c)
                nxt = sorted(bounds, key=bounds.get)[1]
                print(f"| {N} | {L} | {K} | {sps:,.0f} | {name} | {nxt} ({bounds[nxt]:,.0f}) |")
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("calibrate")
    a.add_argument("--build", default=os.path.join(ROOT, "build"))
    a.add_argument("--seconds", type=float, default=8)
    a.add_argument("--out")
    a.add_argument("--mpirun", default="mpirun")
    m = sub.add_parser("measure")
    m.add_argument("--build", default=os.path.join(ROOT, "build"))
    m.add_argument("--mpirun", default="mpirun")
    m.add_argument("--seconds", type=float, default=15)
    m.add_argument("--work", default=os.path.join(ROOT, "build", "capacity-runs"),
                   help="run directories (namespace nodes see this machine's files, not its /tmp)")
    m.add_argument("--out", default="capacity-points.jsonl")
    m.add_argument("--nodes", action="store_true", help="also 2-3 namespace nodes (scripts/cluster-local.sh; root)")
    v = sub.add_parser("validate")
    v.add_argument("--costs", required=True)
    v.add_argument("--points", required=True)
    t = sub.add_parser("table")
    t.add_argument("--costs")
    t.add_argument("--cores", type=int, default=32)
    args = ap.parse_args()
    {"calibrate": calibrate, "measure": measure, "validate": validate, "table": table}[args.cmd](args)


if __name__ == "__main__":
    main()
