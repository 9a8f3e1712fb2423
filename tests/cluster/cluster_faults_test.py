#!/usr/bin/env python3
"""A node lost from a cluster of namespaces on this machine (scripts/cluster-local.sh), with the
cluster and the runner of cluster_test.py:
  node_death           every process of an actor node killed mid-run: the job ends in seconds,
                       mpirun names the host, the reason is not "preempted", model.pt and the
                       summary are saved, the last periodic checkpoint resumes on the 2 nodes left
  silent_node          an actor node's link cut (no FIN, no RST): the job ends within the bound
                       that Open MPI's keepalive gives (scripts/cluster-local.sh), naming the host;
                       nothing is left running on any node
Each case brings the cluster up and down.
Run one: cluster_faults_test.py --mpirl build/mpirl --repo . --workdir DIR CASE"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_test  # noqa: E402
from cluster_test import ENV, Cluster, check, mpirun, new_out, wait_checkpoint  # noqa: E402

# Silent-node bound (docs/clusters.md): Open MPI's keepalive on the daemon connections, 10 s idle + 3 probes
# x 5 s (scripts/cluster-local.sh, slurm/train.sbatch) = 25 s until mpirun reports the silent host;
# 35 s allows for the probes' timers. Then mpirun's teardown (SIGTERM, SIGKILL 2 s later) ends the
# job: TEARDOWN_BOUND_S after the report is a bound on a hang, not a speed.
SILENT_BOUND_S = 35
TEARDOWN_BOUND_S = 30


def start_long_run(args, c, sets):
    out = new_out(args)
    d = os.path.join(out, "run")
    cmd = mpirun(args, c, "n1:2,n2:2,n3:2", ["run.total_env_steps=1000000000", "run.log_interval_s=0.5",
                                             "run.checkpoint_every_updates=20", *sets], out)
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, d


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


if __name__ == "__main__":
    cluster_test.main(globals())
