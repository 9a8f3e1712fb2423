#!/usr/bin/env python3
"""The learners' self-checks at start and `mpirl selftest`, in mpi_test.py's style:
  self_check_falls_back_together  a check failing on one learner: both switch (ATen scan, MPI reducer, eager steps)
  self_check_reducer_fatal        the MPI reducer disagreeing: the job stops before training, naming the rank
  selftest_command                `mpirl selftest`: a row per rank, the reducer and bandwidth; a faulty row fails
Run one: self_check_test.py --mpirl build/mpirl CASE"""
import os
import re
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import ENV, check, command, finished_run, run_streamed, seconds_after, summary  # noqa: E402


def case_self_check_falls_back_together(args):
    # Each check fails on one learner only (MPIRL_TEST_SELF_CHECK_FAULT): the scan and the reducer
    # on learner 1, the step on learner 0. The verdicts are agreed, so both learners switch to the
    # ATen scan, eager steps and a new MPI reducer, each saying so, and the run trains on. On the
    # CPU the step check runs because MPIRL_TEST_STEP_MODE=static gives the learners the static-
    # buffer step a CUDA graph captures, and MPIRL_TEST_REDUCER_FALLBACK lets the MPI reducer be
    # replaced as NCCL's would be.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 5, ["roles.learners=2", "model.core=\"lru\"", "run.total_env_steps=60000"], out_dir)
    env = dict(ENV, MPIRL_TEST_SELF_CHECK_FAULT="scan:1,reducer:1,step:0", MPIRL_TEST_STEP_MODE="static",
               MPIRL_TEST_REDUCER_FALLBACK="1")
    code, out, _ = run_streamed(cmd, env, 240)
    sys.stdout.write(out[-3000:])
    d = os.path.join(out_dir, "run")
    s = finished_run(subprocess.CompletedProcess(cmd, code), d, 60000)
    checks = {c["check"]: c for c in s["self_check"]}
    check(s["scan_backend"] == "aten" and not checks["scan"]["ok"] and checks["scan"]["failed_on"] == [1],
          f"the summary: scan failed on learner 1, scan_backend {s['scan_backend']}")
    check(not checks["reducer"]["ok"] and checks["reducer"]["failed_on"] == [1], "the reducer check failed on learner 1")
    check(checks["step"]["ran"] and not checks["step"]["ok"] and checks["step"]["failed_on"] == [0],
          "the step check ran and failed on learner 0")
    check(s["learner_step"].startswith("eager"), f"eager steps ({s['learner_step']})")
    for what in ("linear scans run on the ATen reference from now on",
                 "gradients averaged by MPI_Allreduce from now on", "eager steps from now on"):
        said = sorted(int(r) for r in re.findall(r"learner rank (\d) @ \S+: " + re.escape(what), out))
        check(said == [0, 1], f"both learners, once each: '{what}' ({said})")
    check(s["learner_param_max_abs_diff"] == 0.0, "the learners stay identical")
    # The control: without faults the same run keeps the native scan and the static step.
    code, out, _ = run_streamed(command(args, 5, ["roles.learners=2", "model.core=\"lru\"",
                                                  "run.total_env_steps=30000"], out_dir + "-ok"),
                                dict(ENV, MPIRL_TEST_STEP_MODE="static"), 240)
    s = summary(os.path.join(out_dir + "-ok", "run"))
    check(code == 0 and s["scan_backend"] == "native" and all(c["ok"] for c in s["self_check"])
          and s["learner_step"].startswith("static"), f"without faults: native scan, {s['learner_step']}")


def case_self_check_reducer_fatal(args):
    # The MPI reducer disagreeing with MPI_Allreduce on learner 1 has nothing to fall back to: the
    # job stops before training with an error naming the check and the rank, and no rank hangs.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 5, ["roles.learners=2", "run.total_env_steps=60000"], out_dir)
    code, out, lines = run_streamed(cmd, dict(ENV, MPIRL_TEST_SELF_CHECK_FAULT="reducer:1"), 120)
    sys.stdout.write(out[-2000:])
    check(code != 0, f"exit code {code} != 0")
    check("self-check" in out and "disagrees with MPI_Allreduce on rank(s) 1" in out, "the error names the check and rank 1")
    check(not os.path.exists(os.path.join(out_dir, "run", "metrics.jsonl")), "no training happened")
    dt = seconds_after(lines, "disagrees with MPI_Allreduce")
    check(dt is not None and dt < 30, f"the job ended {dt:.1f} s after the error")


def case_selftest_command(args):
    # `mpirl selftest` on 3 ranks: a table of every rank's checks, the reducer and the MPI bandwidth,
    # and which GPU checks could not run; exit 0. A faulty scan on rank 2: its row fails, exit 1.
    base = [args.mpirun, "-n", "3", "--oversubscribe", args.mpirl, "selftest", "--set", "learner.batch_size=8"]
    p = subprocess.run(base, env=ENV, capture_output=True, text=True, timeout=240)
    print(p.stdout, p.stderr[-2000:])
    check(p.returncode == 0 and "selftest: every check passed" in p.stdout, f"selftest passes (exit {p.returncode})")
    rows = re.findall(r"^ +(\d) +\S+ +cpu +ok \S+ +ok \S+ +ok \S+\s*$", p.stdout, re.M)
    check(rows == ["0", "1", "2"], f"a row per rank with scan, step and inference ok ({rows})")
    check("MPI_Allreduce (host)" in p.stdout and "GB/s bus" in p.stdout, "the reducer check and the MPI bandwidth")
    check("GPU checks not run" in p.stdout, "says which GPU checks could not run here")
    bad_key = subprocess.run(base + ["--set", "learner.batch_sise=8"], env=ENV, capture_output=True, text=True,
                             timeout=120)
    check(bad_key.returncode == 2 and bad_key.stderr.count("config error") == 1 and "'learner.batch_sise'" in bad_key.stderr,
          f"a bad key: exit {bad_key.returncode}, named once ({bad_key.stderr.strip()[:160]})")
    p = subprocess.run(base, env=dict(ENV, MPIRL_TEST_SELF_CHECK_FAULT="scan:2"), capture_output=True, text=True,
                       timeout=240)
    print(p.stdout)
    check(p.returncode == 1 and re.search(r"^ +2 .* FAILED ", p.stdout, re.M) and "selftest: FAILED" in p.stdout,
          f"a faulty scan on rank 2 fails its row and the command (exit {p.returncode})")
    p = subprocess.run(base, env=dict(ENV, MPIRL_TEST_SELF_CHECK_FAULT="inference:1"), capture_output=True, text=True,
                       timeout=240)
    print(p.stdout)
    check(p.returncode == 1 and re.search(r"^ +1 +\S+ +cpu +ok \S+ +ok \S+ +FAILED ", p.stdout, re.M),
          f"central inference that disagrees with local acting on rank 1 fails its row (exit {p.returncode})")


if __name__ == "__main__":
    mpi_test.main(globals())
