#!/usr/bin/env python3
"""Multi-node tests on a cluster of namespaces on this machine (scripts/cluster-local.sh): real
hostnames, addresses, /tmp and /dev/shm per node, Open MPI over TCP between nodes.
Here: the cluster (Cluster), the launch helpers and the runner (main) that cluster_faults_test.py
(a node lost) and cluster_slurm_test.py (Slurm on the nodes) share, and the placement cases:
  three_nodes          learner + replay on n1, actors on n2/n3: a short job finishes, the summary's
                       rank table names each rank's host, the counts add up across nodes
  central_three_nodes  central inference: an inference rank on each actor node serves that node's
                       actors; the job finishes and the counts add up across nodes
  learners_two_nodes   3 learners on 2 nodes: gradients averaged over TCP, identical parameters;
                       each learner picks its GPU by its index among its node's learners
                       (MPIRL_FAKE_GPUS=2: the pick without CUDA)
Each case brings the cluster up and down. Run one: cluster_test.py --mpirl build/mpirl --repo . --workdir DIR CASE"""
import argparse
import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "slurm"))
import slurm_test  # noqa: E402

check = mpi_test.check
ENV = dict(mpi_test.ENV)
wait_checkpoint = mpi_test.wait_checkpoint  # for cluster_faults_test.py and cluster_slurm_test.py


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


def main(cases=None):
    """Runs the case named on the command line from `cases` (a module's globals; default: these)."""
    cases = cases if cases is not None else globals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirl", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case")
    args = ap.parse_args()
    args.mpirl, args.repo, args.workdir = map(os.path.abspath, (args.mpirl, args.repo, args.workdir))
    os.makedirs(args.workdir, exist_ok=True)
    cases[f"case_{args.case}"](args)
    print(f"PASSED: {args.case}")


if __name__ == "__main__":
    main()
