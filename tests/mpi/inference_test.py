#!/usr/bin/env python3
"""Central inference (actor.inference = "central") end to end: real mpirun, real ranks.
  central_job              `-n 5 ... --set actor.inference='"central"'` with every other setting at its
                           default finishes; counts add up; the inference rank's batching statistics
                           reach the metrics rows, the status line and summary.json; the rows it
                           served match the env steps the actors took
  central_groups_recurrent 2 env groups per actor and a recurrent core (LRU) with APPO, 2 inference
                           ranks per node: each actor served by one, counts add up
  local_env_groups         env groups with local inference: the rollouts and counts are as without
  central_kill_inference   SIGKILL of the inference rank mid-run: the job ends, mpirun names the rank,
                           nothing is left running
  central_resume           a central run preempted (SIGUSR1) after a checkpoint resumes, counts add up
Run one: inference_test.py --mpirl build/mpirl CASE"""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, config_of, finished_run, run, summary, ranks_left  # noqa: E402

CENTRAL = 'actor.inference="central"'


def metrics_rows(d):
    return [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]


def check_served_rows(s, d, groups):
    """Every env step an actor took needed one row; rows beyond those are the steps of the
    rollouts cut by the stop and the requests still in flight then (at most T + 1 steps per env)."""
    cfg = config_of(d)
    E, T = cfg["env"]["num_envs"], cfg["actor"]["rollout_len"]
    inf = s["inference"]
    tot = inf["total"]
    sent = s["replay"]["actor_env_steps"]
    slack = s["actors"] * E * (T + 1)
    check(inf["final_reports"] == inf["inference_ranks"] == len(inf["ranks"]),
          f"a final report from each of the {inf['inference_ranks']} inference rank(s)")
    check(sent <= tot["rows"] <= sent + slack,
          f"rows served {tot['rows']} cover the {sent} env steps the actors sent (at most {slack} more)")
    check(tot["requests"] * E >= tot["rows"] * groups and tot["batches"] > 0 and tot["rows_mean"] > 0,
          f"{tot['batches']} batches of {tot['rows_mean']:.1f} rows on average from {tot['requests']} requests")
    check(sum(tot["batch_rows_hist"].values()) == tot["batches"],
          f"the batch-size histogram counts every batch ({tot['batch_rows_hist']})")
    check(tot["latency_ms_mean"] > 0 and tot["forward_ms_mean"] > 0, "latency and forward time reported")
    check(all(r["actors"] >= 1 and r["groups"] == groups for r in inf["ranks"]),
          f"each inference rank served actors in {groups} group(s)")


def case_central_job(args):
    p, dt, d = run(args, 5, [CENTRAL, "run.total_env_steps=400000", "run.log_interval_s=0.2"], 300)
    s = finished_run(p, d, 400000)
    check(s["learners"] == 1 and s["actors"] == 2, "5 ranks: learner, replay, inference rank, 2 actors")
    roles = {r["rank"]: r["role"] for r in s["ranks"]}
    check(roles == {0: "learner", 1: "replay", 2: "inference", 3: "actor", 4: "actor"}, f"rank table {roles}")
    check_served_rows(s, d, 1)
    rows = metrics_rows(d)
    with_inf = [r["inference"] for r in rows if "inference" in r]
    # An interval may see no batch at all when the machine stalls for longer than it (0.2 s here): the
    # statistics must then say so, and be consistent otherwise.
    served = [i for i in with_inf if i["batches"] > 0]
    check(len(with_inf) >= 1 and len(served) >= 1, f"{len(with_inf)} of {len(rows)} metrics rows carry the inference "
          f"statistics, {len(served)} with batches served in their interval")
    bad = [i for i in with_inf if (i["rows"] == 0) != (i["batches"] == 0) or
           abs(i["rows_mean"] - (i["rows"] / i["batches"] if i["batches"] else 0)) > 1e-6 * max(1, i["rows_mean"])]
    check(not bad, f"rows_mean = rows / batches in every row, 0 with no batch (inconsistent: {bad[:2]})")
    check("infer " in p.stdout, "the status line shows rows per batch and the latency")
    check(s["policy_lag_mean"] >= 0 and "policy_lag_max" in s, f"policy lag reported ({s['policy_lag_mean']:.1f})")
    inf = s["inference"]
    check(inf["acting_lag_samples"] >= 1 and 0 <= inf["acting_lag_mean"] <= inf["acting_lag_max"] <= s["learner_updates"],
          f"acting lag sampled {inf['acting_lag_samples']} times: mean {inf['acting_lag_mean']:.2f}, max {inf['acting_lag_max']}")
    check("inference rank 2" in p.stdout + p.stderr, "the inference rank says what it serves")


def case_central_groups_recurrent(args):
    p, dt, d = run(args, 7, [CENTRAL, "actor.env_groups=2", 'model.core="lru"', 'learner.algo="appo"',
                             "roles.inference_per_node=2", "run.total_env_steps=150000"], 300)
    s = finished_run(p, d, 150000)
    roles = {r["rank"]: r["role"] for r in s["ranks"]}
    check([roles[r] for r in range(7)] == ["learner", "replay", "inference", "inference", "actor", "actor", "actor"],
          f"two inference ranks on the node: {roles}")
    check_served_rows(s, d, 2)
    served = sorted(r["actors"] for r in s["inference"]["ranks"])
    check(served == [1, 2], f"3 actors shared round-robin by the 2 inference ranks ({served})")


def case_local_env_groups(args):
    p, dt, d = run(args, 4, ["actor.env_groups=4", "run.total_env_steps=100000"], 240)
    s = finished_run(p, d, 100000)
    check("inference" not in s, "local inference: no inference statistics")


def rank_pid(out_dir, rank):
    """The pid of world rank RANK of the job writing to OUT_DIR (Open MPI sets OMPI_COMM_WORLD_RANK)."""
    for pid in subprocess.run(["pgrep", "-f", out_dir], capture_output=True, text=True).stdout.split():
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and b"mpirl" in open(f"/proc/{pid}/cmdline", "rb").read():
            return int(pid)
    return None


def case_central_kill_inference(args):
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = mpi_test.command(args, 5, [CENTRAL, "run.total_env_steps=1000000000", "run.log_interval_s=0.5"], out_dir)
    d = os.path.join(out_dir, "run")
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        check(mpi_test.wait_for_rows(d, 3, 120), "the central run is learning (3 metrics rows)")
        pid = rank_pid(out_dir, 2)
        check(pid is not None, f"found the inference rank's pid ({pid})")
        os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    sys.stdout.write(out[-3000:].replace("\r", "\n"))
    check(proc.returncode != 0, f"the job failed (exit {proc.returncode})")
    check("rank 2" in out and ("signal 9" in out or "Killed" in out), "mpirun names rank 2, killed by signal 9")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")
    if os.path.exists(os.path.join(d, "summary.json")):  # learner 0 saves what it can when the launcher TERMs it
        s = summary(d)
        check(s["stop_reason"] in ("aborted", "running"), f"learner 0's summary says why ({s['stop_reason']})")


def case_central_resume(args):
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    sets = [CENTRAL, "actor.env_groups=2", "run.total_env_steps=1000000000", "run.checkpoint_interval_s=0",
            "run.checkpoint_every_updates=20", "run.log_interval_s=0.5"]
    cmd = mpi_test.command(args, 5, sets, out_dir)
    d = os.path.join(out_dir, "run")
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(mpi_test.wait_for_rows(d, 3, 120) and mpi_test.wait_checkpoint(d, 120), "central run with a checkpoint")
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=120)
    sys.stdout.write(out[-2000:].replace("\r", "\n"))
    s = finished_run(proc, d, 1, exit_code=75)
    check(s["stop_reason"] == "preempted" and s["final_checkpoint_written"], "preempted after a final checkpoint")
    check(s["inference"]["final_reports"] == 1, "the inference rank reported before the run ended")
    ckpt = mpi_test.latest_checkpoint(d)
    st, rs, _ = mpi_test.checkpoint_facts(ckpt)
    target = st["env_steps"] + 150000
    p2, _, _ = mpi_test.run_resume(args, d, [f"run.total_env_steps={target}"], 300)
    s2 = finished_run(p2, d, target)
    mpi_test.check_resumed(d, ckpt, st, rs)
    mpi_test.no_step_counted_twice(s, s2, d)
    check(s2["inference"]["total"]["rows"] > 0 and s2["segment"] == 1, "the resumed segment served its actors centrally")


if __name__ == "__main__":
    mpi_test.main(globals())
