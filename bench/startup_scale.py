#!/usr/bin/env python3
"""Start-up time against rank count (issue 31, item 5): for each N, one mpirun -n N job of
CartPole (1 learner, 1 replay, N-2 actors of 16 envs) that stops after its first rollouts, and the
wall-clock time from launching mpirun to:
  init   rank 0's first log line (MPI_Init, host gather, config validated on rank 0 and sent out);
  ready  learner 0's "learners on ..." line (communicators split, models built, self-check done);
  exit   mpirun's exit (the final checkpoint, dumps and every rank's shutdown included).
Times of day in the log are converted with the date the job started. This machine oversubscribes
its 2 cores past N = 2, so the figures are an upper bound of a cluster's per-node cost; what
grows with N here is what a cluster pays too (MPI wire-up, the gather and broadcasts at start).
Usage: bench/startup_scale.py --mpirl build/mpirl [--ranks 4,8,16,32] [--repeat 2]"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import time


def clock_of(line, day):
    m = re.match(r"\[(\d\d):(\d\d):(\d\d)\.(\d\d\d)\]", line)
    if not m:
        return None
    h, mi, s, ms = (int(x) for x in m.groups())
    return day + h * 3600 + mi * 60 + s + ms / 1000


def one(args, n, work):
    out = os.path.join(work, f"n{n}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    actors = n - 2
    steps = actors * 16 * 32  # one rollout per actor
    cmd = [args.mpirun, "-n", str(n), "--oversubscribe", args.mpirl, "train", "--set", f'run.out_dir="{out}"',
           "--set", 'run.name="run"', "--set", 'env.id="CartPole-v1"', "--set", "env.num_envs=16",
           "--set", "actor.rollout_len=32", "--set", f"run.total_env_steps={steps}", "--set", "run.log_interval_s=1",
           "--set", "replay.capacity=" + str(max(256, actors * 16 * 2))]
    t0 = time.time()
    day = datetime.datetime.fromtimestamp(t0).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    t_exit = time.time()
    if p.returncode != 0:
        raise SystemExit(f"n={n}: exit {p.returncode}\n{p.stderr[-2000:]}")
    lines = (p.stdout + p.stderr).splitlines()
    first_log = min(c for c in (clock_of(l, day) for l in lines) if c is not None)
    ready = next(clock_of(l, day) for l in lines if "] info: learners on " in l)
    shutil.rmtree(out, ignore_errors=True)
    return {"n": n, "init": first_log - t0, "ready": ready - t0, "exit": t_exit - t0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirl", default="build/mpirl")
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    ap.add_argument("--ranks", default="4,8,16,32")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mpirl-startup-")
    print(f"start-up of an mpirl job against rank count, {os.cpu_count()} cores, seconds from launching mpirun"
          f" (median of {args.repeat})")
    print(f"{'ranks':>5} {'init':>7} {'ready':>7} {'exit':>7}")
    for n in (int(x) for x in args.ranks.split(",")):
        runs = [one(args, n, work) for _ in range(args.repeat)]
        med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in ("init", "ready", "exit")}
        print(f"{n:>5} {med['init']:>7.2f} {med['ready']:>7.2f} {med['exit']:>7.2f}", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
