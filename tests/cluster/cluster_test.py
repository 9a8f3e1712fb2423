#!/usr/bin/env python3
"""Multi-node tests on a cluster of namespaces on this machine (scripts/cluster-local.sh): real
hostnames, addresses, /tmp and /dev/shm per node, Open MPI over TCP between nodes.
  three_nodes          learner + replay on n1, actors on n2/n3: a short job finishes, the summary's
                       rank table names each rank's host, the counts add up across nodes
  central_three_nodes  central inference: an inference rank on each actor node serves that node's
                       actors; the job finishes and the counts add up across nodes
  learners_two_nodes   3 learners on 2 nodes: gradients averaged over TCP, identical parameters;
                       each learner picks its GPU by its index among its node's learners
                       (MPIRL_FAKE_GPUS=2: the pick without CUDA)
  node_death           every process of an actor node killed mid-run: the job ends in seconds,
                       mpirun names the host, the reason is not "preempted", model.pt and the
                       summary are saved, the last periodic checkpoint resumes on the 2 nodes left
  silent_node          an actor node's link cut (no FIN, no RST): the job ends within the bound
                       that Open MPI's keepalive gives (scripts/cluster-local.sh), naming the host;
                       nothing is left running on any node
  slurm_*              sbatch -N 3 placement, preemption, node death under Slurm, the scaling
                       study, and slurm/selftest.sbatch (a table row per node)
Each case brings the cluster up and down. Run one: cluster_test.py --mpirl build/mpirl --repo . --workdir DIR CASE"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
import types
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "slurm"))
import slurm_test  # noqa: E402

check = mpi_test.check
ENV = dict(mpi_test.ENV)
# Silent-node bound (docs/clusters.md): Open MPI's keepalive on the daemon connections, 10 s idle + 3 probes
# x 5 s (scripts/cluster-local.sh, slurm/train.sbatch) = 25 s until mpirun reports the silent host;
# 35 s allows for the probes' timers. Then mpirun's teardown (SIGTERM, SIGKILL 2 s later) ends the
# job: TEARDOWN_BOUND_S after the report is a bound on a hang, not a speed.
SILENT_BOUND_S = 35
TEARDOWN_BOUND_S = 30


class Cluster:
    def __init__(self, args, n, with_slurm=False):
        self.script = os.path.join(args.repo, "scripts", "cluster-local.sh")
        self.n = n
        self.sh("down")
        p = self.sh("up", str(n), *(["--slurm"] if with_slurm else []), timeout=600)
        check(p.returncode == 0, f"cluster of {n} nodes up{' with Slurm' if with_slurm else ''}")
        if with_slurm:  # Slurm's commands run on n1, as on a login node
            slurm_test.PREFIX[:] = ["bash", self.script, "exec", "n1"]

    def sh(self, *a, timeout=120):
        p = subprocess.run(["bash", self.script, *a], capture_output=True, text=True, timeout=timeout)
        print(p.stdout + p.stderr, flush=True)
        return p

    def cmd(self, node, *a):
        return ["bash", self.script, "exec", node, *a]

    def procs(self, node):
        """Processes on NODE other than the holder of its namespaces."""
        p = subprocess.run(["bash", self.script, "status"], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith(node + ":"):
                if " down" in line:
                    return 0
                return int(line.split("processes")[1].split()[0])
        return 0

    def down(self):
        self.sh("down")


def mpirun(args, cluster, hosts, sets, out_dir, extra=(), map_by=None):
    cmd = cluster.cmd("n1", args.mpirun, "--host", hosts, *(["--map-by", map_by] if map_by else []),
                      "--oversubscribe", *extra, args.mpirl, "train",
                      "--set", f"run.out_dir={json.dumps(out_dir)}", "--set", 'run.name="run"')
    for s in sets:
        cmd += ["--set", s]
    print("$", " ".join(cmd), flush=True)
    return cmd


def new_out(args):
    d = os.path.join(args.workdir, f"c-{uuid.uuid4().hex[:8]}")
    os.makedirs(d)
    return d


def finished(args, cluster, hosts, n, sets, map_by=None, extra=(), timeout=300):
    out = new_out(args)
    t0 = time.time()
    p = subprocess.run(mpirun(args, cluster, hosts, sets, out, extra, map_by), env=ENV, capture_output=True,
                       text=True, timeout=timeout)
    sys.stdout.write(p.stdout[-3000:].replace("\r", "\n") + p.stderr[-3000:])
    print(f"(took {time.time() - t0:.1f} s)")
    return p, os.path.join(out, "run")


def case_three_nodes(args):
    c = Cluster(args, 3)
    try:
        p, d = finished(args, c, "n1:2,n2:2,n3:2", 6, ["run.total_env_steps=200000"])
        s = mpi_test.finished_run(p, d, 200000)
        table = {r["rank"]: (r["role"], r["host"]) for r in s["ranks"]}
        want = {0: ("learner", "n1"), 1: ("replay", "n1"), 2: ("actor", "n2"), 3: ("actor", "n2"),
                4: ("actor", "n3"), 5: ("actor", "n3")}
        check(table == want, f"rank table: {table}")
        check(s["hosts"] == 3 and s["actors"] == 4, "3 hosts, 4 actors")
        check("placement on 3 host(s): n1: learner 0, replay 1 | n2: actors 2-3 | n3: actors 4-5" in p.stdout + p.stderr,
              "learner 0 logs the placement")
        # Every actor delivered: the replay counts rollouts from each actor rank.
        check(s["replay"]["rollouts"] > 0 and s["replay"]["actor_env_steps"] >= 200000, "actors on n2 and n3 delivered")
        check("every 300 s" in p.stdout + p.stderr, "periodic checkpoints on by default across hosts (every 300 s)")
    finally:
        c.down()


def case_shards_three_nodes(args):
    # roles.replays = 2 over 3 nodes: shard 0 on n1 (rank 1), shard 1 on n2's first free rank; n2's
    # actor sends to its own node's shard, n3 has none and its actors spread over both. Counts add
    # up over the shards, both stored and served, and the dumps join into one virtual dataset.
    import shards_test
    c = Cluster(args, 3)
    try:
        p, d = finished(args, c, "n1:2,n2:2,n3:2", 6, ["roles.replays=2", "replay.selector=\"uniform\"",
                                                      "replay.max_times_sampled=0", "replay.capacity=1024",
                                                      "run.total_env_steps=200000"])
        s = mpi_test.finished_run(p, d, 200000)
        table = {r["rank"]: (r["role"], r["host"]) for r in s["ranks"]}
        want = {0: ("learner", "n1"), 1: ("replay", "n1"), 2: ("replay", "n2"), 3: ("actor", "n2"),
                4: ("actor", "n3"), 5: ("actor", "n3")}
        check(table == want, f"rank table: {table}")
        check("n1: learner 0, replay 1 | n2: replay 2, actor 3 | n3: actors 4-5" in p.stdout + p.stderr,
              "learner 0 logs the placement with both shards")
        shards_test.check_shard_dumps(d, 2, s["replay"]["fill"])
    finally:
        c.down()


def case_central_three_nodes(args):
    c = Cluster(args, 3)
    try:
        p, d = finished(args, c, "n1:2,n2:3,n3:3", 8, ['actor.inference="central"', "actor.env_groups=2",
                                                      "run.total_env_steps=200000"])
        s = mpi_test.finished_run(p, d, 200000)
        table = {r["rank"]: (r["role"], r["host"]) for r in s["ranks"]}
        want = {0: ("learner", "n1"), 1: ("replay", "n1"), 2: ("inference", "n2"), 3: ("actor", "n2"),
                4: ("actor", "n2"), 5: ("inference", "n3"), 6: ("actor", "n3"), 7: ("actor", "n3")}
        check(table == want, f"rank table: {table}")
        check("n1: learner 0, replay 1 | n2: inference 2, actors 3-4 | n3: inference 5, actors 6-7" in p.stdout + p.stderr,
              "learner 0 logs the placement with the inference ranks")
        inf = s["inference"]
        hosts = sorted((r["rank"], r["host"], r["actors"]) for r in inf["ranks"])
        check(hosts == [(2, "n2", 2), (5, "n3", 2)] and inf["final_reports"] == 2,
              f"each actor node's inference rank served its own 2 actors ({hosts})")
        sent = s["replay"]["actor_env_steps"]
        check(inf["total"]["rows"] >= sent, f"rows served {inf['total']['rows']} >= env steps sent {sent}")
    finally:
        c.down()


def case_learners_two_nodes(args):
    c = Cluster(args, 2)
    try:
        # --map-by node: ranks 0 n1, 1 n2, 2 n1 (learners), 3 n2 (replay), 4 n1, 5 n2 (actors)
        p, d = finished(args, c, "n1:3,n2:3", 6, ["roles.learners=3", "run.total_env_steps=200000"], map_by="node",
                        extra=["-x", "MPIRL_FAKE_GPUS=2"])
        s = mpi_test.finished_run(p, d, 200000)
        hosts = {r["rank"]: r["host"] for r in s["ranks"]}
        check([hosts[r] for r in range(6)] == ["n1", "n2", "n1", "n2", "n1", "n2"], f"placement {hosts}")
        check(s["learner_param_max_abs_diff"] == 0.0,
              f"3 learners on 2 nodes end with identical parameters (max abs diff {s['learner_param_max_abs_diff']})")
        check(s["gradient_reducer"].startswith("MPI_Allreduce"), f"gradients averaged over MPI/TCP ({s['gradient_reducer']})")
        gpus = {r["rank"]: r["gpu"] for r in s["ranks"] if r["role"] == "learner"}
        # By index among the node's learners: rank 2 is n1's second learner -> cuda:1 (its world
        # rank modulo 2 would say cuda:0); rank 1 is n2's first -> cuda:0.
        check(gpus == {0: 0, 1: 0, 2: 1}, f"GPU pick by node-local learner index: {gpus}")
    finally:
        c.down()


def start_long_run(args, c, sets):
    out = new_out(args)
    d = os.path.join(out, "run")
    cmd = mpirun(args, c, "n1:2,n2:2,n3:2", ["run.total_env_steps=1000000000", "run.log_interval_s=0.5",
                                             "run.checkpoint_every_updates=20", *sets], out)
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, d


wait_checkpoint = mpi_test.wait_checkpoint


def nothing_left(c, nodes):
    for _ in range(50):
        left = {n: c.procs(n) for n in nodes}
        if not any(left.values()):
            return left
        time.sleep(0.2)
    return left


def case_node_death(args):
    c = Cluster(args, 3)
    proc = None
    try:
        proc, d = start_long_run(args, c, [])
        check(wait_checkpoint(d) and mpi_test.wait_for_rows(d, 4, 60), "learning, with a periodic checkpoint")
        before = mpi_test.latest_checkpoint(d)
        t0 = time.time()
        c.sh("kill", "n3")
        out, _ = proc.communicate(timeout=120)
        dt = time.time() - t0
        sys.stdout.write(out[-4000:].replace("\r", "\n"))
        print(f"node n3 killed: the job ended {dt:.1f} s later with exit {proc.returncode}")
        check(proc.returncode != 0, f"the job failed (exit {proc.returncode})")
        check("n3" in out and "lost communication with a remote daemon" in out, "mpirun names the lost node n3")
        log = os.path.join(d, "..", "launcher.log")
        open(log, "w").write(out)
        pm = subprocess.run([sys.executable, os.path.join(args.repo, "slurm", "postmortem.py"), log, "--run", d],
                            capture_output=True, text=True)
        check(pm.stdout.split()[:2] == ["node_lost", "n3"], f"postmortem.py: {pm.stdout.strip()}")
        # Learner 0 either got the launcher's TERM and wrote "aborted", or Open MPI ended it at once
        # when its TCP peer on n3 hung up: then the summary is the one written after the last
        # periodic checkpoint ("running"). Both name the checkpoint a resume starts from.
        s = mpi_test.summary(d)
        check(s["stop_reason"] == "node_lost" and s["ranks_stop_reason"] in ("aborted", "running") and
              s["lost_host"] == "n3" and os.path.exists(os.path.join(s.get("checkpoint", "-"), "COMPLETE")),
              f"summary: stop_reason {s['stop_reason']}, the ranks said {s['ranks_stop_reason']}, lost "
              f"{s['lost_host']}, checkpoint {os.path.basename(s.get('checkpoint', '-'))}")
        check(os.path.getsize(os.path.join(d, "model.pt")) > 0, "model.pt saved")
        check("preempted" not in out, "nothing says preempted")
        left = nothing_left(c, ["n1", "n2"])
        check(not any(left.values()), f"nothing left running on n1, n2 ({left})")
        latest = mpi_test.latest_checkpoint(d)
        check(latest is not None and latest >= before, f"the last periodic checkpoint {os.path.basename(latest)} is kept")
        st, rs, _ = mpi_test.checkpoint_facts(latest)
        # Resume on the two nodes left, with fewer actors (2 instead of 4).
        target = st["env_steps"] + 100000
        cmd = c.cmd("n1", args.mpirun, "--host", "n1:2,n2:2", "--oversubscribe", args.mpirl, "train", "--resume", d,
                    "--set", f"run.total_env_steps={target}")
        t1 = time.time()
        p2 = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
        sys.stdout.write(p2.stdout[-2000:].replace("\r", "\n") + p2.stderr[-2000:])
        print(f"resumed on n1+n2 and ran to {target} env steps in {time.time() - t1:.1f} s")
        s2 = mpi_test.finished_run(p2, d, target)
        mpi_test.check_resumed(d, latest, st, rs)
        check(s2["actors"] == 2 and s2["resumed_from"] == latest, "resumed from the checkpoint with 2 actors")
    finally:
        if proc and proc.poll() is None:
            proc.kill()
        c.down()


def case_silent_node(args):
    c = Cluster(args, 3)
    proc = None
    try:
        proc, d = start_long_run(args, c, [])
        check(mpi_test.wait_for_rows(d, 4, 90), "learning (4 metrics rows)")
        lines = []  # (time, line) as mpirun prints them
        import threading
        reader = threading.Thread(target=lambda: lines.extend((time.time(), l) for l in proc.stdout), daemon=True)
        reader.start()
        t0 = time.time()
        c.sh("cut", "n3")
        try:
            proc.wait(timeout=4 * (SILENT_BOUND_S + TEARDOWN_BOUND_S))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        t_end = time.time()
        reader.join(10)
        out = "".join(l for _, l in lines)
        sys.stdout.write(out[-4000:].replace("\r", "\n"))
        t_report = next((t for t, l in lines if t >= t0 and "lost communication with a remote daemon" in l), None)
        print(f"n3's link cut: mpirun reported it after "
              f"{'never' if t_report is None else f'{t_report - t0:.1f} s'}; the job ended {t_end - t0:.1f} s "
              f"after the cut with exit {proc.returncode}")
        check(t_report is not None and t_report - t0 <= SILENT_BOUND_S,
              f"mpirun reported the silent node within {SILENT_BOUND_S} s of the cut")
        check(t_end - t_report <= TEARDOWN_BOUND_S, f"the job ended within {TEARDOWN_BOUND_S} s of the report")
        check(proc.returncode != 0 and "n3" in out, "the job failed naming n3")
        left = nothing_left(c, ["n1", "n2", "n3"])
        check(not any(left.values()), f"nothing left running on any node, n3 included ({left})")
    finally:
        if proc and proc.poll() is None:
            proc.kill()
        c.down()


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
    # slurm/study.py --cluster with 1, 2 and 3 actor nodes (and a learner node of their own) on the
    # namespace cluster's Slurm: one sbatch job per point and one for its env-only ceiling.
    c = Cluster(args, 4, with_slurm=True)
    try:
        out = new_out(args)
        note = "4 emulated nodes share this machine's cores: this proves the command, not scaling"
        cmd = c.cmd("n1", sys.executable, os.path.join(args.repo, "slurm", "study.py"), "--cluster", "--nodes", "1,2,3",
                    "--actors", "1", "--step-ms", "1", "--seconds", "4", "--out", out, "--mpirl", args.mpirl,
                    "--ceiling", os.path.join(os.path.dirname(args.mpirl), "bench_actor_ceiling"), "--note", note)
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=280, cwd=args.repo)
        print(p.stdout[-3000:], p.stderr[-3000:])
        check(p.returncode == 0, f"study.py --cluster exited 0 ({p.returncode})")
        import csv
        rows = list(csv.DictReader(open(os.path.join(out, "study.csv"))))
        check([int(r["nodes"]) for r in rows] == [1, 2, 3] and all(float(r["sps"]) > 0 and float(r["env_only_sps"]) > 0
                                                                   for r in rows),
              f"study.csv: a row with SPS and env-only SPS for 1, 2 and 3 actor nodes")
        md = open(os.path.join(out, "study.md")).read()
        print(md)
        check(note in md and "Slurm cluster" in md, "study.md says it ran on Slurm and that the nodes share cores")
        check(os.path.getsize(os.path.join(out, "study.png")) > 10000, "study.png written")
    finally:
        c.down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirl", required=True)
    ap.add_argument("--mpirun", default="mpirun")
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
