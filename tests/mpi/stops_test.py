#!/usr/bin/env python3
"""How a run stops when something goes wrong or is slow, in mpi_test.py's style:
  wall_limit_starved            slow envs: the learner stops at the wall limit while waiting for a batch
  dump_failure_keeps_model      replay dumps that fail are reported; model and summary written, exit 3
  abort_on_rank_error           a rank that throws ends the whole job within 10 s, naming the rank
  stall_detected                actors silent for run.stall_timeout_s end the job, naming ranks and hosts
  backpressure_is_not_a_stall   actors waiting on a full queue with a rollout sent are not stalled
  slow_start_is_not_a_stall     learner 0 starts 3 s late (3 x run.stall_timeout_s): the actors,
                                which wait for its first parameters, are not silent, and the run ends
  start_stall_detected          learner 0 never gets to publish (60 s late, 0.5 s timeout): after
                                10 x run.stall_timeout_s the replay ends the job, naming the learners
Run one: stops_test.py --mpirl build/mpirl CASE"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import (ENV, check, command, finished_run, run, run_streamed, seconds_after, summary,  # noqa: E402
                      wait_for_rows, ranks_left)


def case_wall_limit_starved(args):
    # Slow envs (0.2 s per step, sleeping): the learner gets no batch before the wall limit, and
    # must stop at the limit while waiting rather than after its first update.
    p, dt, d = run(args, 4, ["env.id=\"Synthetic\"", "env.step_cost_us=200000", "env.cost_mode=\"sleep\"",
                             "env.num_envs=2", "run.max_wall_seconds=3", "run.log_interval_s=1"], 120)
    check(p.returncode == 0, f"exit code 0 (got {p.returncode})")
    s = summary(d)
    check(s["stop_reason"] == "max_wall_seconds", f"stopped for the wall limit ({s['stop_reason']})")
    # The event: it stopped while waiting, before any update (a rollout takes 32 x 0.2 s > 3 s).
    check(s["learner_updates"] == 0 and s["stop_decision"]["update"] == 0,
          f"stopped while waiting for its first batch ({s['learner_updates']} updates)")
    # Hang bounds only (the limit is 3 s; a slow machine takes longer to start and to leave).
    check(s["wall_time_s"] < 3 + 10, f"learner stopped {s['wall_time_s']:.2f} s after its start (limit 3 s)")
    check(dt < 90, f"whole job gone in {dt:.1f} s")


def case_dump_failure_keeps_model(args):
    # The dump directory turns into a file mid-run: a requested dump and the final one fail, are
    # reported, and the model and summary are written all the same; the job exits 3. Dumps are
    # asked for with SIGUSR2 (replay.pid), so what happens is decided by events, not by a timer.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    dump_dir = os.path.join(out_dir, "dumps")
    os.makedirs(dump_dir)
    sets = ["run.total_env_steps=3000000", "replay.dump_interval_s=0", "run.log_interval_s=0.2",
            f"replay.dump_path={json.dumps(dump_dir + '/r.h5')}"]
    cmd = command(args, 4, sets, out_dir)
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    d = os.path.join(out_dir, "run")
    seen = []
    import threading
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
    reader.start()

    def wait(cond, limit_s=120):
        t0 = time.time()
        while not cond() and time.time() - t0 < limit_s and proc.poll() is None:
            time.sleep(0.02)
        return cond()

    try:
        check(wait_for_rows(d, 1, 120), "the run is learning")
        replay_pid = int(open(os.path.join(d, "replay.pid")).read())
        os.kill(replay_pid, signal.SIGUSR2)
        check(wait(lambda: any("replay dump (SIGUSR2):" in l for l in seen)), "the first requested dump completed")
        shutil.rmtree(dump_dir)
        open(dump_dir, "w").write("not a directory\n")
        os.kill(replay_pid, signal.SIGUSR2)
        check(wait(lambda: any("replay dump (SIGUSR2) failed" in l for l in seen)),
              "the failed requested dump was logged and the run went on")
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    out = "".join(seen)
    sys.stdout.write(out[-4000:])
    s = finished_run(proc, d, 3000000, exit_code=3)
    dump = s["replay_dump"]
    check(dump["failures"] >= 2 and "r.h5" in dump["last_error"], f"dump failures reported: {dump['failures']}, "
          f"{dump['last_error'][:160]!r}")
    check(s["replay"]["dumps"] >= 1, f"the dump that completed before is reported ({s['replay']['dumps']})")


def case_abort_on_rank_error(args):
    # A rank that throws mid-run (learner 0, the replay, an actor) ends the whole job non-zero
    # within 10 s, naming the rank, with no rank left running.
    for rank in (0, 1, 3):
        name = f"t-{uuid.uuid4().hex[:8]}"
        out_dir = os.path.join(args.workdir, name)
        cmd = command(args, 4, ["run.total_env_steps=100000000"], out_dir)
        env = dict(ENV, MPIRL_TEST_FAULT=f"{rank}:2")
        code, out, lines = run_streamed(cmd, env, 180)
        sys.stdout.write(out[-1500:])
        check(code != 0, f"rank {rank}: job exit code {code} != 0")
        check(f"fatal error on rank {rank}" in out and "injected fault" in out,
              f"rank {rank}: the error names the rank and the reason")
        fatal = [l for l in out.splitlines() if "mpirl: fatal error on" in l]
        check(len(fatal) == 1 and f"fatal error on rank {rank}" in fatal[0] and "injected fault" in fatal[0],
              f"rank {rank}: one fatal error, the fault's own; the other ranks add none ({fatal})")
        dt = seconds_after(lines, "injected fault")
        check(dt is not None and dt < 10, f"rank {rank}: job gone {dt:.1f} s after the fault was logged (< 10 s)")
        left = ranks_left(out_dir)
        check(not left, f"rank {rank}: no rank left running ({left})")


def case_stall_detected(args):
    # Every env step takes 10 s (a hung simulator): the replay hears nothing from the actors for
    # run.stall_timeout_s and ends the job, naming the silent ranks and their hosts.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 4, ["env.id=\"Synthetic\"", "env.step_cost_us=10000000", "env.cost_mode=\"sleep\"",
                            "env.num_envs=1", "run.stall_timeout_s=2"], out_dir)
    code, out, lines = run_streamed(cmd, ENV, 180)
    sys.stdout.write(out[-1500:])
    check(code != 0, f"job exit code {code} != 0")
    check("run.stall_timeout_s" in out and "rank 2 @" in out and "rank 3 @" in out,
          "the error names the silent actor ranks and their hosts")
    silent = [float(x) for x in re.findall(r"silent for ([0-9.]+) s", out)]
    check(silent and min(silent) >= 2, f"the ranks were silent for longer than the timeout ({silent})")
    dt = seconds_after(lines, "run.stall_timeout_s")
    check(dt is not None and dt < 10, f"job gone {dt:.1f} s after the stall was reported (< 10 s)")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")


def case_backpressure_is_not_a_stall(args):
    # A slow learner (1.5 s per update on any machine: MPIRL_TEST_UPDATE_DELAY_MS) keeps the queue
    # full, so actors wait on it longer than run.stall_timeout_s: waiting with a rollout sent is
    # not a stall. The replay says when that happened (the event this test needs to have seen).
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 4, ["run.stall_timeout_s=0.5", "run.total_env_steps=8000", "replay.capacity=48"], out_dir)
    code, out, _ = run_streamed(cmd, dict(ENV, MPIRL_TEST_UPDATE_DELAY_MS="1500"), 240)
    sys.stdout.write(out[-3000:])
    s = finished_run(subprocess.CompletedProcess(cmd, code), os.path.join(out_dir, "run"), 8000)
    check("with a rollout sent (back-pressure" in out and "not a stall" in out,
          "an actor waited longer than run.stall_timeout_s under back-pressure, and the run went on")


def case_slow_start_is_not_a_stall(args):
    # The replay's clock for the actors starts when they can step (the first learner request or
    # rollout): before that, a slow start is no actor's silence. Without that, this run ends with
    # "no message from 2 actor(s)" about 1 s after the replay starts.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 4, ["run.stall_timeout_s=1", "run.total_env_steps=4000"], out_dir)
    code, out, _ = run_streamed(cmd, dict(ENV, MPIRL_TEST_START_DELAY_MS="3000"), 180)
    sys.stdout.write(out[-1500:])
    check("MPIRL_TEST_START_DELAY_MS=3000" in out, "the start-up delay was injected")
    finished_run(subprocess.CompletedProcess(cmd, code), os.path.join(out_dir, "run"), 4000)


def case_start_stall_detected(args):
    # A start-up that never ends (learner 0 sleeps 60 s before its first parameters): after
    # 10 x run.stall_timeout_s = 5 s the replay ends the job, naming the learners.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 4, ["run.stall_timeout_s=0.5"], out_dir)
    code, out, lines = run_streamed(cmd, dict(ENV, MPIRL_TEST_START_DELAY_MS="60000"), 180)
    sys.stdout.write(out[-1500:])
    check(code != 0, f"job exit code {code} != 0")
    check("no request from the learners (rank 0 @" in out and "10 x run.stall_timeout_s" in out,
          "the error names the learners and the start-up limit")
    after = [float(x) for x in re.findall(r"no rollout from any actor for ([0-9.]+) s", out)]
    check(after and after[0] >= 5, f"reported after 10 x 0.5 s or more ({after})")
    check(not re.search(r"no message from \d+ actor", out), "no actor is blamed for the learners' start")
    dt = seconds_after(lines, "10 x run.stall_timeout_s")
    check(dt is not None and dt < 30, f"job gone {dt:.1f} s after the stall was reported (< 30 s, not the 60 s sleep)")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")


if __name__ == "__main__":
    mpi_test.main(globals())
