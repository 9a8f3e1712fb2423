#!/usr/bin/env python3
"""Slurm on a cluster of namespaces on this machine (scripts/cluster-local.sh --slurm), with the
cluster and the runner of cluster_test.py:
  slurm_*              sbatch -N 3 placement, preemption, node death under Slurm, the scaling
                       study, and slurm/selftest.sbatch (a table row per node)
Each case brings the cluster up and down.
Run one: cluster_slurm_test.py --mpirl build/mpirl --repo . --workdir DIR CASE"""
import os
import re
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "slurm"))
import slurm_test  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_test  # noqa: E402
from cluster_test import ENV, Cluster, check, new_out, wait_checkpoint  # noqa: E402


def slurm_job(args, name, train_args, nodes, wait=False):
    out = new_out(args)
    p, job, log = slurm_test.submit(args, name, out, train_args, extra=["-N", nodes], wait=wait)
    check(p.returncode == 0 and job, f"sbatch -N {nodes}: job {job}")
    return job, log, os.path.join(out, f"{name}-{job}")


def case_slurm_placement(args):
    # sbatch -N 3 slurm/train.sbatch: the learner and the replay on the first node, 2 actors on
    # each other node (MPIRL_ACTORS_PER_NODE=2), TCP between nodes, the job finishes.
    c = Cluster(args, 3, with_slurm=True)
    try:
        job, log, d = slurm_job(args, "mpirl-place", ["--set", "run.total_env_steps=200000"], "3", wait=True)
        text = open(log).read()
        print(text[-3000:])
        s = mpi_test.finished_run(types.SimpleNamespace(returncode=0), d, 200000)
        table = {r["rank"]: (r["role"], r["host"]) for r in s["ranks"]}
        want = {0: ("learner", "n1"), 1: ("replay", "n1"), 2: ("actor", "n2"), 3: ("actor", "n2"),
                4: ("actor", "n3"), 5: ("actor", "n3")}
        check(table == want, f"placement as asked: {table}")
        check("learner nodes: n1; actor nodes: n2 n3" in text and "mpirl exited with 0" in text,
              "the job log names the nodes and the exit")
        # Central inference: the inference rank on the learner node (its GPU), after the replay.
        job, log, d = slurm_job(args, "mpirl-central", ["--set", "run.total_env_steps=200000", "--set",
                                                        'actor.inference="central"'], "3", wait=True)
        text = open(log).read()
        print(text[-3000:])
        s = mpi_test.finished_run(types.SimpleNamespace(returncode=0), d, 200000)
        table = {r["rank"]: (r["role"], r["host"]) for r in s["ranks"]}
        want = {0: ("learner", "n1"), 1: ("replay", "n1"), 2: ("inference", "n1"), 3: ("actor", "n2"),
                4: ("actor", "n2"), 5: ("actor", "n3"), 6: ("actor", "n3")}
        check(table == want, f"central placement: {table}")
        inf = s["inference"]["ranks"]
        check(len(inf) == 1 and inf[0]["actors"] == 4 and "inference rank(s)" in text,
              f"the learner node's inference rank served all 4 actors ({[(r['rank'], r['actors']) for r in inf]})")
    finally:
        c.down()


def case_slurm_preempt(args):
    # USR1 to the batch shell of a 3-node job -> checkpoint -> exit 75 -> requeue -> resume -> finish,
    # counters and replay CRC equal the checkpoint's (tests/slurm/slurm_test.py's checks).
    c = Cluster(args, 3, with_slurm=True)
    try:
        slurm_test.SBATCH_EXTRA[:] = ["-N", "3"]
        slurm_test.case_preempt_requeue(args)
    finally:
        c.down()


def case_slurm_node_death(args):
    # A 2-3 node job loses n3: mpirun ends in seconds, the script names the node, requeues from the
    # last periodic checkpoint, and the job resumes on the two nodes left (2 actors instead of 4).
    c = Cluster(args, 3, with_slurm=True)
    job = None
    try:
        job, log, d = slurm_job(args, "mpirl-nodefail", ["--set", "run.total_env_steps=2000000", "--set",
                                                         "run.checkpoint_every_updates=20", "--set",
                                                         "run.log_interval_s=0.5"], "2-3")
        check(wait_checkpoint(d, 180) and slurm_test.job_field(job, "NumNodes") == "3",
              "running on 3 nodes, with a periodic checkpoint")
        before = mpi_test.latest_checkpoint(d)
        t0 = time.time()
        c.sh("kill", "n3")
        while time.time() - t0 < 120 and int(slurm_test.job_field(job, "Restarts") or 0) < 1:
            time.sleep(0.5)
        t_rq = time.time() - t0
        check(int(slurm_test.job_field(job, "Restarts") or 0) >= 1, f"job {job} requeued {t_rq:.1f} s after n3 died")
        while time.time() - t0 < 400 and slurm_test.job_field(job, "JobState") not in (
                "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            time.sleep(1)
        state = slurm_test.job_field(job, "JobState")
        text = open(log).read()
        print("\n".join(l for l in text.splitlines() if "steps  " not in l)[-6000:])
        print(f"n3 killed; requeued after {t_rq:.1f} s; the job ended {state} {time.time() - t0:.1f} s after the kill")
        check(state == "COMPLETED", f"the requeued job completed ({state})")
        check("node_lost n3" in text and "requeueing job" in text and "restart 1" in text,
              "the job log names the lost node n3, the requeue and the restart")
        s = mpi_test.finished_run(types.SimpleNamespace(returncode=0), d, 2000000)
        resumed = s["resumed_from"]
        check(s["segment"] >= 1 and resumed >= before and s["actors"] == 2 and s["hosts"] == 2,
              f"resumed from {os.path.basename(resumed)} on 2 nodes with 2 actors, finished ({s['stop_reason']})")
    finally:
        if job and slurm_test.job_field(job, "JobState") in ("PENDING", "RUNNING", "REQUEUED"):
            slurm_test.slurm("scancel", job)
        c.down()


def case_slurm_selftest(args):
    # slurm/selftest.sbatch on a 3-node allocation: one rank per node, a table row per node, the
    # all-reduce checked and its bandwidth measured over TCP between the nodes; the job exits 0.
    c = Cluster(args, 3, with_slurm=True)
    try:
        out = new_out(args)
        log = os.path.join(out, "selftest-%j.out")
        cmd = c.cmd("n1", "sbatch", "--parsable", "--wait", "-N", "3", f"--output={log}",
                    f"--export=ALL,MPIRL_BIN={args.mpirl}", os.path.join(args.repo, "slurm", "selftest.sbatch"),
                    "--set", "learner.batch_size=8")
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=280, cwd=args.repo)
        job = p.stdout.strip().split(";")[0]
        text = open(log.replace("%j", job)).read()
        print(text)
        check(p.returncode == 0 and "selftest: every check passed" in text, f"the job exited {p.returncode}")
        hosts = re.findall(r"^ +\d +(n\d) +cpu +ok \S+ +ok \S+ +ok \S+", text, re.M)
        check(hosts == ["n1", "n2", "n3"], f"a row per node with its checks, central inference's included ({hosts})")
        check(re.search(r"MPI_Allreduce 16 MiB over 3 ranks: .* GB/s bus", text) and "vs MPI_Allreduce: ok" in text,
              "the all-reduce between the nodes: checked and its bandwidth measured")
    finally:
        c.down()


def case_slurm_study(args):
    # slurm/study.py --cluster with 1 and 3 actor nodes (and a learner node of their own) on the
    # namespace cluster's Slurm: one sbatch job per point and one for its env-only ceiling. Two
    # points, not three: each keeps the machine's two cores busy for its seconds, and two show the
    # command and the multi-node point as well as three.
    c = Cluster(args, 4, with_slurm=True)
    try:
        out = new_out(args)
        note = "4 emulated nodes share this machine's cores: this proves the command, not scaling"
        cmd = c.cmd("n1", sys.executable, os.path.join(args.repo, "slurm", "study.py"), "--cluster", "--nodes", "1,3",
                    "--actors", "1", "--step-ms", "1", "--seconds", "4", "--out", out, "--mpirl", args.mpirl,
                    "--ceiling", os.path.join(os.path.dirname(args.mpirl), "bench_actor_ceiling"), "--note", note)
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=280, cwd=args.repo)
        print(p.stdout[-3000:], p.stderr[-3000:])
        check(p.returncode == 0, f"study.py --cluster exited 0 ({p.returncode})")
        import csv
        rows = list(csv.DictReader(open(os.path.join(out, "study.csv"))))
        check([int(r["nodes"]) for r in rows] == [1, 3] and all(float(r["sps"]) > 0 and float(r["env_only_sps"]) > 0
                                                                for r in rows),
              f"study.csv: a row with SPS and env-only SPS for 1 and 3 actor nodes")
        md = open(os.path.join(out, "study.md")).read()
        print(md)
        check(note in md and "Slurm cluster" in md, "study.md says it ran on Slurm and that the nodes share cores")
        check(os.path.getsize(os.path.join(out, "study.png")) > 10000, "study.png written")
    finally:
        c.down()


if __name__ == "__main__":
    cluster_test.main(globals())
