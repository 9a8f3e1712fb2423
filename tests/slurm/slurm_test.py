#!/usr/bin/env python3
"""Slurm tests for slurm/train.sbatch on a real (local) Slurm: scripts/slurm-local.sh starts it.
  sbatch_finishes   a short job finishes and writes a complete run (summary, model, checkpoint)
  preempt_requeue   USR1 to the batch shell mid-run: checkpoint, exit 75, `scontrol requeue`, the
                    requeued job resumes the same run from the checkpoint and finishes
Run one: slurm_test.py --mpirl build/mpirl --repo . --workdir DIR CASE"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time
import types
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402  (check, summary, finished_run, checkpoint_facts, check_resumed)

check = mpi_test.check
# Where Slurm's commands run: here (scripts/slurm-local.sh), or on a node of the namespace cluster
# (tests/cluster sets ["bash", "scripts/cluster-local.sh", "exec", "n1"]); extra sbatch flags (-N 3).
PREFIX = []
SBATCH_EXTRA = []


def sh(*cmd, timeout=60):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def slurm(*cmd, timeout=60):
    return sh(*PREFIX, *cmd, timeout=timeout)


def job_field(job, field):
    rc, out, _ = slurm("scontrol", "show", "job", str(job))
    m = re.search(rf"\b{field}=(\S+)", out)
    return m.group(1) if rc == 0 and m else None


def submit(args, name, out_dir, train_args, extra=(), wait=False):
    job_out = os.path.join(out_dir, "job-%j.out")
    cmd = [*PREFIX, "sbatch", "--parsable", f"--job-name={name}", f"--output={job_out}", "--time=10",
           f"--export=ALL,MPIRL_BIN={args.mpirl},MPIRL_ACTORS_PER_NODE=2", *SBATCH_EXTRA, *extra]
    if wait:
        cmd.append("--wait")
    cmd += [os.path.join(args.repo, "slurm", "train.sbatch"), "--set", f"run.out_dir={json.dumps(out_dir)}",
            *train_args]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=args.repo)
    print(p.stdout, p.stderr, flush=True)
    job = p.stdout.strip().split(";")[0].splitlines()[0] if p.stdout.strip() else None
    return p, job, os.path.join(out_dir, f"job-{job}.out")


def setup(args):
    if not PREFIX:  # tests/cluster brings up its own Slurm
        rc, out, err = sh("bash", os.path.join(args.repo, "scripts", "slurm-local.sh"), "start", timeout=500)
        print(out, err)
        check(rc == 0, "the local Slurm is up (scripts/slurm-local.sh start)")
    out_dir = os.path.join(args.workdir, f"s-{uuid.uuid4().hex[:8]}")
    os.makedirs(out_dir)
    return out_dir


def case_sbatch_finishes(args):
    out_dir = setup(args)
    name = "mpirl-finish"
    t0 = time.time()
    p, job, log = submit(args, name, out_dir, ["--set", "run.total_env_steps=200000"], wait=True)
    dt = time.time() - t0
    sys.stdout.write(open(log).read()[-3000:].replace("\r", "\n") if os.path.exists(log) else "(no job output)\n")
    check(p.returncode == 0, f"sbatch --wait: job {job} exited 0 (got {p.returncode}) in {dt:.0f} s")
    d = os.path.join(out_dir, f"{name}-{job}")
    s = mpi_test.finished_run(types.SimpleNamespace(returncode=0), d, 200000)
    check(s["stop_reason"] == "total_env_steps" and s["segment"] == 0, "finished by its step budget, not resumed")
    ckpt = mpi_test.latest_checkpoint(d)
    check(ckpt is not None and os.path.exists(os.path.join(ckpt, "COMPLETE")), f"final checkpoint {ckpt}")
    text = open(log).read()
    check("mpirl exited with 0" in text and "4 ranks = 1 learner(s)" in text, "the job log names the layout and the exit")


def case_preempt_requeue(args):
    out_dir = setup(args)
    name = "mpirl-preempt"
    # Events, not seconds: USR1 once a periodic checkpoint exists (every 50 updates, about 2% of
    # the budget), and the resumed run ends on its step budget.
    budget = 3000000
    p, job, log = submit(args, name, out_dir, ["--set", f"run.total_env_steps={budget}", "--set",
                                               "run.log_interval_s=1", "--set", "run.checkpoint_interval_s=0",
                                               "--set", "run.checkpoint_every_updates=50"])
    check(p.returncode == 0 and job, f"submitted job {job}")
    d = os.path.join(out_dir, f"{name}-{job}")
    try:
        check(mpi_test.wait_for_rows(d, 1, 180) and mpi_test.wait_checkpoint(d, 180),
              "the job is learning, with a periodic checkpoint")
        rc, out, err = slurm("scancel", "--signal=USR1", "--batch", job)
        check(rc == 0, f"scancel --signal=USR1 --batch {job} ({err})")
        t_sig = time.time()
        # The first run ends "preempted"; its summary and final checkpoint stay until the resumed one ends.
        seg0 = None
        while time.time() - t_sig < 60 and seg0 is None:
            try:
                s = mpi_test.summary(d)
                seg0 = s if s.get("stop_reason") == "preempted" and s.get("replay_final") else None
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        check(seg0 is not None, f"the first run stopped as preempted {time.time() - t_sig:.1f} s after USR1")
        ckpt = mpi_test.latest_checkpoint(d)
        st, rs, _ = mpi_test.checkpoint_facts(ckpt)
        check(st["version"] == seg0["learner_updates"] and st["env_steps"] == seg0["env_steps"],
              f"its final checkpoint: update {st['version']}, {st['env_steps']} env steps")
        # Requeued: PENDING for cred_expire + 1 s (slurm-local.sh sets 10 s; forcing StartTime=now
        # makes Slurm kill the relaunch: "Job credential revoked").
        t_rq = time.time()
        while time.time() - t_rq < 60 and int(job_field(job, "Restarts") or 0) < 1:
            time.sleep(0.5)
        check(int(job_field(job, "Restarts") or 0) >= 1, f"job {job} was requeued")
        t_end = time.time()
        while time.time() - t_end < 300 and job_field(job, "JobState") not in ("COMPLETED", "FAILED", "CANCELLED",
                                                                                "TIMEOUT", "NODE_FAIL"):
            time.sleep(1)
        state = job_field(job, "JobState")
        sys.stdout.write(open(log).read()[-5000:].replace("\r", "\n"))
        check(state == "COMPLETED", f"the requeued job completed ({state}, exit {job_field(job, 'ExitCode')})")
    finally:
        if job_field(job, "JobState") in ("PENDING", "RUNNING", "REQUEUED"):
            slurm("scancel", job)
    check(st["env_steps"] < budget, f"preempted before the budget ({st['env_steps']} < {budget} env steps)")
    s = mpi_test.finished_run(types.SimpleNamespace(returncode=0), d, budget)
    check(s["segment"] == 1 and s["resumed_from"] == ckpt and s["stop_reason"] == "total_env_steps",
          f"the same run resumed from {os.path.basename(ckpt)} and finished ({s['stop_reason']})")
    mpi_test.check_resumed(d, ckpt, st, rs)
    mpi_test.no_step_counted_twice(seg0, s, d)
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    check([r["time_s"] for r in rows] == sorted(r["time_s"] for r in rows), "metrics.jsonl continues in time")
    text = open(log).read()
    check("requeueing job" in text and "restart 1" in text and "mpirl exited with 75" in text,
          "the job log shows exit 75, the requeue and the restart")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirl", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case")
    args = ap.parse_args()
    args.mpirl, args.repo, args.workdir = map(os.path.abspath, (args.mpirl, args.repo, args.workdir))
    os.makedirs(args.workdir, exist_ok=True)
    globals()[f"case_{args.case}"](args)
    print(f"PASSED: {args.case}")


if __name__ == "__main__":
    main()
