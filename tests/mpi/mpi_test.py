#!/usr/bin/env python3
"""MPI integration tests for mpirl: each case starts a real `mpirun ... mpirl train` and checks
what it wrote (summary.json, metrics.jsonl, model.pt) or how it failed (exit code, message, time,
no run directory). Run one case: mpi_test.py --mpirl build/mpirl CASE. The learning cases read
MPIRL_SEED (default 1)."""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import uuid

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def command(args, n, sets, out_dir, mpirun_flags=(), config=None):
    """The mpirun command line of a training run writing to OUT_DIR/run (from a config file if given)."""
    cmd = [args.mpirun, "-n", str(n), "--oversubscribe", *mpirun_flags, args.mpirl, "train",
           *(["--config", config] if config else []),
           "--set", f"run.out_dir={json.dumps(out_dir)}", "--set", "run.name=\"run\""]
    for s in sets:
        cmd += ["--set", s]
    print("$", " ".join(cmd), flush=True)
    return cmd


def run(args, n, sets, timeout, config=None):
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, n, sets, out_dir, config=config)
    t0 = time.time()
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    dt = time.time() - t0
    sys.stdout.write(p.stdout[-4000:].replace("\r", "\n"))
    sys.stdout.write(p.stderr[-4000:])
    return p, dt, os.path.join(out_dir, "run")


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def config_of(run_dir):
    with open(os.path.join(run_dir, "config.toml"), "rb") as f:
        return tomllib.load(f)


def finished_run(p, run_dir, min_steps, exit_code=0):
    """Checks a finished run against counts kept independently by the actors, the replay and the
    learners (each process counts its own; the test compares them)."""
    check(p.returncode == exit_code, f"exit code {exit_code} (got {p.returncode})")
    s = summary(run_dir)
    cfg = config_of(run_dir)
    E, T = cfg["env"]["num_envs"], cfg["actor"]["rollout_len"]
    check(s["replay_final"] is True, "summary written again after the replay's goodbye")
    check(s["env_steps"] >= min_steps, f"env_steps {s['env_steps']} >= {min_steps}")
    check(s["learner_updates"] > 0, f"learner_updates {s['learner_updates']} > 0")
    check(s["sps"] > 0 and s["wall_time_s"] > 0, "sps and wall time reported")
    for f in ("config.toml", "metrics.jsonl", "model.pt"):
        check(os.path.getsize(os.path.join(run_dir, f)) > 0, f"{f} written")
    left = [os.path.basename(f) for f in glob.glob(os.path.join(run_dir, "*.tmp.*"))]
    check(not left, f"no temporary files left in the run directory {left}")
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    check(len(rows) >= 1 and all("env_steps" in r and "sps" in r for r in rows), f"{len(rows)} metrics rows")
    steps = [r["env_steps"] for r in rows]
    check(steps == sorted(steps), "env_steps never decrease between metrics rows")
    r, lc = s["replay"], s["learner_counts"]
    # Actors count what they sent; the replay counts what it stored and what it discarded at the stop.
    check(r["actor_env_steps"] == r["env_steps"] + r["discarded_rollouts"] * E * T,
          f"actors sent {r['actor_env_steps']} env steps = replay stored {r['env_steps']} + discarded "
          f"{r['discarded_rollouts']} rollouts x {E * T}")
    # Learners count the sequences they received (those drained at the stop too); the replay counts
    # what it sampled for each learner.
    check(lc["summed_over_learners"] and lc["received"] == r["sampled"] == sum(r["sampled_by_learner"]),
          f"learners received {lc['received']} sequences = replay sampled {r['sampled']} "
          f"(by learner {r['sampled_by_learner']})")
    check(lc["trained"] + lc["too_old"] <= lc["received"], "trained + dropped <= received")
    check(lc["updates"] == s["learner_updates"] * s["learners"] or s["learners"] == 1,
          "every learner took the same number of updates")
    check(r["inserted"] == r["fill"] + r["removed"] and r["removed"] == r["evicted"] + r["consumed"],
          f"replay counts add up: inserted {r['inserted']} = stored {r['fill']} + removed {r['removed']} "
          f"(evicted {r['evicted']} + consumed {r['consumed']})")
    check(r["inserted"] == r["rollouts"] * E + r["restored"], "inserted = rollouts x num_envs + restored")
    if cfg["replay"]["selector"] == "fifo":  # queue mode: each sample consumes its item
        check(r["consumed"] == r["sampled"] and r["evicted"] == 0, "queue: every sampled item consumed, none evicted")
    check(lc["bootstraps"] == lc["truncations"],
          f"every truncated step trained on was bootstrapped by the learner ({lc['bootstraps']} of {lc['truncations']})")
    return s


def case_default_job(args):
    p, dt, d = run(args, 4, ["run.total_env_steps=200000"], 240)
    s = finished_run(p, d, 200000)
    check(s["learners"] == 1 and s["actors"] == 2, "default layout: 1 learner, 1 replay, 2 actors")
    e = subprocess.run([args.mpirl, "eval", d, "--episodes", "3"], capture_output=True, text=True, timeout=120)
    print(e.stdout, e.stderr)
    check(e.returncode == 0 and "mean return" in e.stdout, "mpirl eval plays the saved policy")
    check(not os.path.exists(os.path.join(d, "replay.pid")), "replay.pid removed at exit")
    # Every checkpoint holds the policy: eval takes a checkpoint directory, or a model file.
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(ckpts and os.path.exists(os.path.join(ckpts[-1], "model.pt")), "the final checkpoint holds model.pt")
    for what in (ckpts[-1], os.path.join(ckpts[-1], "model.pt")):
        e = subprocess.run([args.mpirl, "eval", what, "--episodes", "2"], capture_output=True, text=True, timeout=120)
        print(e.stdout, e.stderr)
        check(e.returncode == 0 and "mean return" in e.stdout, f"mpirl eval {os.path.relpath(what, d)}")
    e = subprocess.run([args.mpirl, "eval", os.path.join(d, "checkpoints")], capture_output=True, text=True, timeout=60)
    check(e.returncode == 2 and "checkpoint directory" in e.stderr, f"a directory without a policy: {e.stderr.strip()}")


def case_two_learners_identical(args):
    p, dt, d = run(args, 5, ["roles.learners=2", "run.total_env_steps=300000"], 240)
    s = finished_run(p, d, 300000)
    check(s["learners"] == 2 and s["actors"] == 2, "2 learners + 1 replay + 2 actors")
    check(s["learner_param_max_abs_diff"] == 0.0,
          f"learners end with identical parameters (max abs diff {s['learner_param_max_abs_diff']})")
    check("learner 0 (of 2)" in p.stdout and "samples/s" in p.stdout,
          "the status line says its samples/s are learner 0's, of 2 learners")
    # Labelled rates: learner 0's own (the unlabelled learner_samples_per_s kept beside it), an
    # estimate for all learners in each row, and the learners' real total in the final summary.
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    check(all(r["learner0_samples_per_s"] == r["learner_samples_per_s"] and r["learners"] == 2
              and r["learners_samples_per_s_est"] == 2 * r["learner0_samples_per_s"] for r in rows),
          f"every metrics row has learner0_samples_per_s, learners = 2 and learners_samples_per_s_est ({len(rows)} rows)")
    total = s["learner_counts"]["trained"] * config_of(d)["actor"]["rollout_len"] / s["wall_time_s"]
    check(s["learner0_samples_per_s"] == s["learner_samples_per_s"] and "learners_samples_per_s_est" not in s
          and abs(s["learners_samples_per_s"] - total) <= 1e-6 * total and s["learners_samples_per_s"] > 0,
          f"summary.json: learner 0's {s['learner0_samples_per_s']:.0f} samples/s, the learners' total "
          f"{s['learners_samples_per_s']:.0f} = their {s['learner_counts']['trained']} sequences trained on / wall time")
    # Normalisation statistics and schedules keep the learners identical too: they average their
    # batch moments over MPI and agree on the env steps that drive the schedules.
    p, dt, d = run(args, 5, ["roles.learners=2", "run.total_env_steps=200000", "model.obs_norm=true",
                             "learner.lr_schedule=\"linear\"", "learner.lr_final=0.0001",
                             "learner.entropy_schedule=\"cosine\"", "run.log_interval_s=0.2"], 240)
    s = finished_run(p, d, 200000)
    check(s["learner_param_max_abs_diff"] == 0.0,
          f"with model.obs_norm, PopArt and schedules the learners stay identical, normalisation buffers included "
          f"(max abs diff {s['learner_param_max_abs_diff']})")
    import torch
    w = torch.jit.load(os.path.join(d, "model.pt"), map_location="cpu").state_dict()
    check(float(w["obs_shift"].abs().sum()) > 0 and bool((w["obs_scale"] != 1).any()) and float(w["value_scale"]) != 1.0,
          f"model.pt carries the observation statistics and PopArt's scale (value_scale {float(w['value_scale']):.3f})")
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    lrs = [r["lr"] for r in rows if "lr" in r]
    check(len(lrs) >= 2 and lrs[0] > lrs[-1] >= 0.0001 * (1 - 1e-9) and all(a >= b for a, b in zip(lrs, lrs[1:])),
          f"the scheduled lr falls row by row ({lrs[0] if lrs else None} -> {lrs[-1] if lrs else None})")


def case_gaussian_appo(args):
    p, dt, d = run(args, 4, ["env.id=\"Pendulum-v1\"", "learner.algo=appo", "run.total_env_steps=60000",
                             "env.num_envs=8"], 240)
    s = finished_run(p, d, 60000)
    check(s["episodes"] > 0 and s["mean_length"] == 200, "Pendulum episodes are truncated at 200 steps")
    lc = s["learner_counts"]
    check(lc["bootstraps"] > 0, f"truncated episodes bootstrapped from the learner's values ({lc['bootstraps']})")


def case_rollout_many_envs(args):
    # Synthetic env, 3 actors, a small queue so back-pressure engages, publish every 4 updates,
    # 16 MPI_Test calls per test of the parameter broadcast (auto gives 1 for this small network).
    p, dt, d = run(args, 5, ["env.id=\"Synthetic\"", "env.num_envs=32", "actor.rollout_len=16",
                             "replay.capacity=64", "learner.publish_interval=4", "run.total_env_steps=150000",
                             "actor.param_tests=16"], 240)
    s = finished_run(p, d, 150000)
    pub = s["params_published"]
    check(pub["broadcasts"] >= 2 and pub["last_version"] >= s["learner_updates"] - 2 * 4,
          f"the newest parameters went out: last broadcast v{pub['last_version']} after {s['learner_updates']} updates "
          f"({pub['broadcasts']} broadcasts)")
    # Not timed: the first (it waits for the actors' start-up) and the last if still in flight.
    check(pub["completed"] >= pub["broadcasts"] - 2 and 0 < pub["broadcast_s_mean"] <= pub["broadcast_s_max"],
          f"each broadcast but the first and last is timed: {pub['completed']} of {pub['broadcasts']}, mean "
          f"{pub['broadcast_s_mean']} s, longest {pub['broadcast_s_max']} s")


def case_prioritized_two_learners(args):
    # One prioritized replay for 2 learners: both sample, priorities from both apply, stale
    # updates (items evicted since they were sampled) are dropped and counted, the ratio limiter
    # holds, and counters add up.
    p, dt, d = run(args, 5, ["roles.learners=2", "replay.selector=\"prioritized\"", "replay.max_times_sampled=0",
                             "replay.capacity=2048", "replay.samples_per_insert=2.0", "run.total_env_steps=300000"], 240)
    s = finished_run(p, d, 300000)
    r = s["replay"]
    check(min(r["sampled_by_learner"]) > 0, f"both learners sampled ({r['sampled_by_learner']})")
    applied, stale = r["priority_updates"], r["stale_priority_updates"]
    check(applied > 0 and stale > 0, f"priority updates applied {applied}, stale dropped {stale}")
    check(applied + stale <= r["sampled"], "no more updates than sampled items")
    check(r["sampled"] - (applied + stale) <= 2 * 2 * 32 * 2,
          f"every batch's update arrived except those in flight at the stop ({r['sampled'] - applied - stale})")
    check(r["evicted"] > 0 and r["consumed"] == 0, "a full buffer evicts its oldest items (none consumed)")
    ratio = r["sampled"] / r["inserted"]
    check(1.5 <= ratio <= 2.5, f"samples per insert {ratio:.2f} held near 2")
    check(r["max_priority"] > 1.0, f"priorities moved (max {r['max_priority']:.3f})")
    check(s["learner_param_max_abs_diff"] == 0.0, "learners stay identical")


def case_recurrent_appo(args):
    # A scan core through the whole path: actors in step mode carrying state across rollouts, the
    # state travelling with each sequence, APPO minibatches slicing it, eval in step mode.
    p, dt, d = run(args, 4, ["env.id=\"RepeatPreviousEasy\"", "model.core=\"lru\"", "learner.algo=appo",
                             "run.total_env_steps=100000"], 240)
    s = finished_run(p, d, 100000)
    check(s["episodes"] > 0 and s["mean_length"] == 51, "RepeatPreviousEasy episodes last 51 steps")
    e = subprocess.run([args.mpirl, "eval", d, "--episodes", "3"], capture_output=True, text=True, timeout=120)
    print(e.stdout, e.stderr)
    check(e.returncode == 0 and "mean return" in e.stdout, "mpirl eval plays the saved recurrent policy")


def case_policy_lag_drop(args):
    # Parameters go out every 8 updates and items more than 2 updates old are dropped from the
    # loss: some are dropped, the rest trained on, and the learners say how many.
    p, dt, d = run(args, 4, ["learner.publish_interval=8", "learner.max_policy_lag=2", "run.total_env_steps=100000"],
                   240)
    s = finished_run(p, d, 100000)
    lc = s["learner_counts"]
    check(lc["too_old"] > 0 and lc["trained"] > 0, f"dropped {lc['too_old']} too-old sequences, trained on {lc['trained']}")
    check(lc["lag_unknown"] == 0, "every item's lag is known in a run without a restore")


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
        left = subprocess.run(["pgrep", "-f", out_dir], capture_output=True, text=True).stdout.split()
        check(not left, f"rank {rank}: no rank left running ({left})")


def run_on_pty(cmd, env, columns, until=None, keys=b""):
    """Runs CMD as the foreground job of a new pseudo-terminal COLUMNS wide; once until() holds,
    types KEYS. Returns (exit code, everything the terminal showed)."""
    import fcntl
    import pty
    import struct
    import termios
    import threading
    pid, fd = pty.fork()
    if pid == 0:  # session leader with the pty as its terminal
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        os.execvpe(cmd[0], cmd, env)
    seen = bytearray()

    def read_all():
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        if until is not None:
            check(until(), "ready for the keys")
            os.write(fd, keys)
        reader.join(300)
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def case_output_lines_and_bar(args):
    # What a person sees. Piped (a Slurm .out, `| tee`): timestamped lines, no terminal codes,
    # although Open MPI gives every rank a pseudo-terminal. On a 120-column terminal (not 80, the
    # width assumed when none can be read): a bar redrawn in place that fits and uses the room, and
    # every log line and the final status line clear it first instead of being glued to it.
    p, _, d = run(args, 4, ["run.total_env_steps=400000", "run.log_interval_s=0.1"], 120)
    check(p.returncode == 0, f"piped run exit code {p.returncode}")
    text = p.stdout + p.stderr
    check("\r" not in text and "\x1b" not in text, "piped: no carriage returns or escape codes")
    rows = re.findall(r"^\[\d\d:\d\d:\d\d\] \[ *\d+\.\ds\] steps .* SPS \| return", p.stdout, re.M)
    check(len(rows) >= 2, f"piped: {len(rows)} timestamped status lines")
    out_dir = os.path.join(args.workdir, f"t-{uuid.uuid4().hex[:8]}")
    cmd = command(args, 4, ["run.total_env_steps=2000000", "run.log_interval_s=0.1"], out_dir)
    env = {k: v for k, v in ENV.items() if k != "CI"}
    env["TERM"] = "xterm"
    code, seen = run_on_pty(cmd, env, 120)
    check(code == 0, f"terminal run exit code {code}")
    bars = [b for b in re.findall(r"\r([^\r\n\x1b]*)\x1b\[K", seen) if "steps" in b]
    check(len(bars) >= 2, f"terminal: {len(bars)} bar redraws")
    widest = max(len(b) for b in bars)
    # A full status line is wider than 120 columns, so the bar takes more than 80 of them only if
    # the width was read from the terminal.
    check(80 < widest <= 119, f"terminal: every bar fits 120 columns and uses more than 80 (widest {widest})")
    # Cleared: "\r\x1b[K" right before the line (a bar itself ends in "\x1b[K", so a line glued to it
    # would end its 4 preceding characters with "\x1b[K" too, without the "\r").
    logs = re.findall(r"(.{0,4})\[\d\d:\d\d:\d\d\.\d{3}\] \[rank", seen, re.S)
    glued = [x for x in logs if not x.endswith("\r\x1b[K")]
    check(logs and not glued, f"terminal: all {len(logs)} log lines clear the bar first ({len(glued)} glued)")
    finals = re.findall(r"(.{0,4})\[\d\d:\d\d:\d\d\] \[ *\d+\.\ds\] steps", seen, re.S)
    check(len(finals) == 1 and finals[0].endswith("\r\x1b[K"),
          f"terminal: the final status line clears the bar first ({finals})")


def case_ctrl_c_interrupts(args):
    # Ctrl-C on the terminal running mpirun (a pseudo-terminal here, mpirun its foreground job):
    # Open MPI puts each rank in a process group of its own, so only mpirun would get the SIGINT
    # and its SIGTERM to the ranks would look like a lost node. The ranks join mpirun's group, so
    # the run stops as "interrupted" (never "aborted" or "preempted"), with model.pt and a summary.
    out_dir = os.path.join(args.workdir, f"t-{uuid.uuid4().hex[:8]}")
    d = os.path.join(out_dir, "run")
    cmd = command(args, 4, ["run.total_env_steps=1000000000", "run.log_interval_s=0.2"], out_dir)
    # b"\x03" is what the terminal sends for Ctrl-C (ISIG: SIGINT to the foreground process group)
    code, seen = run_on_pty(cmd, ENV, 80, until=lambda: wait_for_rows(d, 3, 120), keys=b"\x03")
    out = seen.replace("\r", "")
    sys.stdout.write(out[-3000:])
    print(f"mpirun exited with {code}")
    s = summary(d)
    check(s["stop_reason"] == "interrupted", f"stop_reason {s['stop_reason']} (interrupted expected)")
    check("Ctrl-C stops the run as \"interrupted\"" in out, "learner 0 says it joined mpirun's foreground group")
    check("preempted" not in out and "a rank or a node was lost" not in out, "not taken for a preemption or a lost node")
    check(os.path.getsize(os.path.join(d, "model.pt")) > 0, "model.pt saved")
    left = subprocess.run(["pgrep", "-f", out_dir], capture_output=True, text=True).stdout.split()
    check(not left, f"no rank left running ({left})")


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
    left = subprocess.run(["pgrep", "-f", out_dir], capture_output=True, text=True).stdout.split()
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


def case_bad_dump_path(args):
    blocker = os.path.join(args.workdir, f"file-{uuid.uuid4().hex[:8]}")
    open(blocker, "w").write("x")
    bad(args, [f"replay.dump_path={json.dumps(blocker + '/replay.h5')}"], "replay.dump_path")


def latest_checkpoint(run_dir):
    ds = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*")))
    return ds[-1] if ds else None


def checkpoint_facts(ckpt):
    with open(os.path.join(ckpt, "state.json")) as f:
        st = json.load(f)
    with open(os.path.join(ckpt, "replay_state.json")) as f:
        rs = json.load(f)
    with open(os.path.join(ckpt, "COMPLETE")) as f:
        done = json.load(f)
    return st, rs, done


def wait_checkpoint(run_dir, limit_s=120):
    """Waits for a complete (sealed) checkpoint: an event, however fast the machine is."""
    t0 = time.time()
    while time.time() - t0 < limit_s:
        if glob.glob(os.path.join(run_dir, "checkpoints", "ckpt-*", "COMPLETE")):
            return True
        time.sleep(0.2)
    return False


def run_streamed(cmd, env, timeout):
    """Runs CMD, merging stdout and stderr, noting when each line arrived. Returns (exit code,
    text, lines as (seconds since the start, line)). Durations in tests are taken from a line
    (the fault, the error) to the exit, never from the start: start-up depends on the machine."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append((time.time() - t0, line))
            if time.time() - t0 > timeout:
                raise subprocess.TimeoutExpired(cmd, timeout)
        proc.wait(timeout=max(1, timeout - (time.time() - t0)))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    lines.append((time.time() - t0, ""))  # the exit
    return proc.returncode, "".join(l for _, l in lines), lines


def seconds_after(lines, needle):
    """Seconds from the first line containing NEEDLE to the exit (None if no line has it)."""
    for t, l in lines:
        if needle in l:
            return lines[-1][0] - t
    return None


def wait_for_rows(run_dir, n, limit_s):
    t0 = time.time()
    path = os.path.join(run_dir, "metrics.jsonl")
    while time.time() - t0 < limit_s:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= n:
            return True
        time.sleep(0.2)
    return False


def no_step_counted_twice(before, after, run_dir):
    """Across a resume: the env steps stored after it equal what the resumed actors say they sent
    (less what was discarded at the stop), so nothing from before is counted again."""
    cfg = config_of(run_dir)
    ET = cfg["env"]["num_envs"] * cfg["actor"]["rollout_len"]
    b, a = before["replay"], after["replay"]
    sent = a["actor_env_steps"] - b["actor_env_steps"]
    stored = a["env_steps"] - b["env_steps"]
    discarded = (a["discarded_rollouts"] - b["discarded_rollouts"]) * ET
    check(sent == stored + discarded and stored > 0,
          f"after the resume the actors sent {sent} env steps = {stored} stored + {discarded} discarded (none twice)")


def check_resumed(d, ckpt, st, rs):
    """What the resumed ranks reported right after loading equals what the checkpoint holds."""
    rows = {r["role"]: r for r in map(json.loads, open(os.path.join(d, "resumed.jsonl")))}
    lr, rr = rows["learner"], rows["replay"]
    check(lr["checkpoint"] == ckpt and rr["checkpoint"] == ckpt, f"resumed from {os.path.basename(ckpt)}")
    check(lr["version"] == st["version"] and lr["episodes"] == st["episodes"]
          and lr["elapsed_s"] == st["elapsed_s"],
          f"learner resumed at update {lr['version']}, {lr['episodes']} episodes, {lr['elapsed_s']:.2f} s = the checkpoint's")
    check(rr["replay_items"] == rs["items"] and rr["replay_checksum_crc32"] == rs["checksum_crc32"],
          f"replay resumed {rr['replay_items']} items, CRC-32 {rr['replay_checksum_crc32']:08x} = the checkpoint's")
    check(rr["env_steps"] == st["env_steps"] == rs["status"]["env_steps"] and rr["episodes"] == rs["status"]["episodes"],
          f"replay resumed at {rr['env_steps']} env steps, {rr['episodes']} episodes = the checkpoint's")
    # Every finished episode is in exactly one place: learner 0's statistics or the replay's pending ones.
    check(lr["episodes"] + rr["pending_episode_stats"] == rr["episodes"],
          f"episodes: learner {lr['episodes']} + replay pending {rr['pending_episode_stats']} = replay {rr['episodes']}")


def tensorboard_after_resume(d, ckpt_steps):
    """TensorBoard across a resume from a periodic checkpoint at CKPT_STEPS env steps: the resumed
    run's event file holds a SessionLog START one step past the checkpoint, so TensorBoard's reader
    drops what the earlier run logged after it (those rows moved out of metrics.jsonl) and shows
    the rows metrics.jsonl holds."""
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader
    from tensorboard.compat.proto import event_pb2
    files = sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))
    check(len(files) == 2, f"an event file per segment ({[os.path.basename(f) for f in files]})")
    starts = [e for e in event_file_loader.LegacyEventFileLoader(files[-1]).Load() if e.HasField("session_log")]
    check(len(starts) == 1 and starts[0].session_log.status == event_pb2.SessionLog.START
          and starts[0].step == ckpt_steps + 1,
          f"the resumed run's file marks the resume: SessionLog START at step {[e.step for e in starts]} "
          f"(checkpoint at {ckpt_steps} env steps)")
    stale = [json.loads(l)["env_steps"] for f in glob.glob(os.path.join(d, "metrics.after-checkpoint-*.jsonl"))
             for l in open(f)]
    check(any(x > ckpt_steps for x in stale), f"the earlier run logged {len(stale)} rows after the checkpoint")
    acc = event_accumulator.EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    # Rows at exactly the checkpoint's env steps may be on either side of it: left out of the comparison.
    tb = [e.step for e in acc.Scalars("train/env_steps") if e.step != ckpt_steps]
    want = [r["env_steps"] for r in map(json.loads, open(os.path.join(d, "metrics.jsonl"))) if r["env_steps"] != ckpt_steps]
    check(tb == want, f"TensorBoard's train/env_steps = metrics.jsonl's rows after the resume ({len(tb)} points)"
          + ("" if tb == want else f": {tb} vs {want}"))


def case_checkpoint_resume(args):
    # Two learners, periodic checkpoints; SIGUSR1 to mpirun (as slurm/train.sbatch forwards it):
    # every rank stops at an update boundary after a final checkpoint, exit 75. Resumed, the run
    # continues from the checkpoint's counters, replay contents and metrics, and its counts add up.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    sets = ["roles.learners=2", "run.total_env_steps=1000000000", "run.checkpoint_interval_s=0",
            "run.checkpoint_every_updates=20", "run.log_interval_s=0.5", "replay.selector=\"uniform\"", "replay.max_times_sampled=0",
            "replay.capacity=512"]
    cmd = command(args, 5, sets, out_dir)
    d = os.path.join(out_dir, "run")
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(wait_for_rows(d, 4, 90) and wait_checkpoint(d, 120), "the run is learning, with a periodic checkpoint")
    t0 = time.time()
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=120)
    dt = time.time() - t0
    sys.stdout.write(out[-3000:].replace("\r", "\n"))
    s = finished_run(proc, d, 1, exit_code=75)
    check(s["stop_reason"] == "preempted" and s["final_checkpoint_written"], "stop_reason preempted, final checkpoint written")
    check(dt < 30, f"stopped and checkpointed {dt:.1f} s after the signal")
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(len(ckpts) == 2, f"run.keep_checkpoints = 2 kept ({[os.path.basename(c) for c in ckpts]})")
    ckpt = ckpts[-1]
    st, rs, done = checkpoint_facts(ckpt)
    check(st["version"] == s["learner_updates"] and st["env_steps"] == s["env_steps"],
          f"final checkpoint at update {st['version']}, {st['env_steps']} env steps = the summary's")
    check(done["files"]["replay.h5"]["bytes"] > 0 and rs["items"] == s["replay"]["fill"],
          f"replay part holds the {rs['items']} items the replay held")

    target = st["env_steps"] + 300000
    p2, dt2, _ = run_resume(args, d, [f"run.total_env_steps={target}"], 240)
    s2 = finished_run(p2, d, target)
    check_resumed(d, ckpt, st, rs)
    check(s2["segment"] == 1 and s2["resumed_from"] == ckpt, "summary names the segment and the checkpoint")
    check(s2["learner_updates"] > st["version"] and s2["episodes"] > st["episodes"], "counters went on from the checkpoint")
    no_step_counted_twice(s, s2, d)
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    times = [r["time_s"] for r in rows]
    check(times == sorted(times), "metrics.jsonl continues: time_s never goes back")
    check(not glob.glob(os.path.join(d, "checkpoints", ".tmp-*")), "no temporary checkpoint left")


class Float32Equal(float):
    """Equal to a float32 rounding of the value (TensorBoard scalars are float32)."""
    def __eq__(self, other):
        return abs(float(self) - float(other)) <= 1e-6 * max(1.0, abs(float(self)))

    __hash__ = float.__hash__


def case_eval_during_training(args):
    # eval.interval_s: learner 0 plays its current policy in a separate `mpirl eval` process; each
    # result is a row of eval.jsonl (and eval/... in TensorBoard). Waits for 2 results (events,
    # not seconds), then stops the run with SIGUSR1.
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, 4, ["run.total_env_steps=1000000000", "eval.interval_s=0.5", "eval.episodes=3",
                            "run.log_interval_s=0.5"], out_dir)
    d = os.path.join(out_dir, "run")
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path, t0 = os.path.join(d, "eval.jsonl"), time.time()
    while time.time() - t0 < 180 and not (os.path.exists(path) and sum(1 for _ in open(path)) >= 2):
        time.sleep(0.2)
    # SIGUSR1 while an evaluation plays: mpirun forwards it to the ranks' process groups, and the
    # evaluation (a group of its own) must not die of it (it did: counted as a failed evaluation).
    def playing():
        return subprocess.run(["pgrep", "-f", os.path.join(d, "eval") + " "], capture_output=True,
                              text=True).stdout.split()
    t1 = time.time()
    while time.time() - t1 < 60 and not playing():
        time.sleep(0.01)
    proc.send_signal(signal.SIGUSR1)
    out, _ = proc.communicate(timeout=120)
    sys.stdout.write(out[-2000:].replace("\r", "\n"))
    rows = [json.loads(l) for l in open(path)] if os.path.exists(path) else []
    check(len(rows) >= 2, f"{len(rows)} evaluations written to eval.jsonl")
    check(proc.returncode == 75, f"the run stopped on SIGUSR1 (exit {proc.returncode})")
    for r in rows:
        check(r["eval_episodes"] == 3 and r["eval_greedy"] is True and r["eval_min_return"] <= r["eval_mean_return"]
              <= r["eval_max_return"], f"update {r['update']}: 3 greedy episodes, mean {r['eval_mean_return']:.1f}")
    check([r["update"] for r in rows] == sorted(r["update"] for r in rows) and rows[-1]["update"] > rows[0]["update"],
          "later evaluations play later policies")
    check("evaluation of update" in out, "learner 0 logs each result")
    check(os.path.exists(os.path.join(d, "eval", "model.pt")), "the evaluated policy is in eval/")
    left = subprocess.run(["pgrep", "-f", os.path.join(d, "eval")], capture_output=True, text=True).stdout.split()
    check(not left, f"no evaluation process left after the run ({left})")
    ev = summary(d)["eval"]
    check(ev["started"] >= len(rows) and ev["failed"] == 0, f"summary.json counts the evaluations ({ev})")
    # The best evaluated policy is kept: model_best.pt, the one whose evaluation scored highest.
    best = summary(d)["best_policy"]
    top = max(rows, key=lambda r: r["eval_mean_return"])
    check(best["source"] == "evaluation" and best["mean_return"] == top["eval_mean_return"]
          and best["update"] == top["update"] and os.path.exists(os.path.join(d, "model_best.pt")),
          f"model_best.pt holds the best evaluation's policy (mean {best['mean_return']}, update {best['update']})")
    from tensorboard.backend.event_processing import event_accumulator
    acc = event_accumulator.EventAccumulator(d, size_guidance={"scalars": 0})
    acc.Reload()
    tb = [(e.step, e.value) for e in acc.Scalars("eval/mean_return")]
    check(tb == [(r["env_steps"], Float32Equal(r["eval_mean_return"])) for r in rows],
          f"TensorBoard's eval/mean_return = eval.jsonl's rows ({len(tb)} points)")


def run_resume(args, d, sets, timeout, n=5):
    cmd = [args.mpirun, "-n", str(n), "--oversubscribe", args.mpirl, "train", "--resume", d]
    for x in sets:
        cmd += ["--set", x]
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(p.stdout[-3000:].replace("\r", "\n"))
    sys.stdout.write(p.stderr[-3000:])
    return p, time.time() - t0, d


def case_resume_refusals(args):
    # A corrupt newest checkpoint and a partial one are skipped for the previous complete one; an
    # unsafe config change is refused naming the key; no complete checkpoint at all is an error.
    # Checkpoints by update count, not by time: ~290 updates of 32 x 32 steps give 5 periodic ones
    # and the final one however fast the machine is (0.5 s gave one on a fast machine).
    p, dt, d = run(args, 4, ["run.total_env_steps=300000", "run.checkpoint_interval_s=0",
                             "run.checkpoint_every_updates=50", "run.keep_checkpoints=3"], 240)
    s = finished_run(p, d, 300000)
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(s["learner_updates"] >= 100 and len(ckpts) == 3,
          f"{len(ckpts)} checkpoints kept (run.keep_checkpoints = 3) after {s['learner_updates']} updates")
    newest, previous = ckpts[-1], ckpts[-2]
    with open(os.path.join(newest, "learner.pt"), "r+b") as f:  # one byte flipped: same size, other CRC
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    partial = os.path.join(d, "checkpoints", "ckpt-999999999999-9999999999999")
    shutil.copytree(previous, partial)
    os.unlink(os.path.join(partial, "COMPLETE"))

    t0 = time.time()
    p2, dt2, _ = run_resume(args, d, ["learner.lr=0.1"], 60, n=4)
    check(p2.returncode == 2 and "'learner.lr' changed" in p2.stderr, f"unsafe change refused with exit 2 ({p2.returncode})")
    check(dt2 < 60, f"refused in {dt2:.1f} s")
    st, rs, _ = checkpoint_facts(previous)
    p3, _, _ = run_resume(args, d, [f"run.total_env_steps={st['env_steps'] + 100000}"], 240, n=4)
    finished_run(p3, d, st["env_steps"] + 100000)
    check("ckpt-999999999999" in p3.stderr and "no COMPLETE marker" in p3.stderr, "the partial checkpoint was named and skipped")
    check(os.path.basename(newest) in p3.stderr and "CRC-32" in p3.stderr, "the corrupt checkpoint was named and skipped")
    check_resumed(d, previous, st, rs)
    tensorboard_after_resume(d, st["env_steps"])

    # Resuming the finished run without a new budget: a no-op (exit 0) that says how to extend it,
    # and nothing in the run changes (the replay is not re-linked, no checkpoint is written).
    before = {f: open(os.path.join(d, f), "rb").read() for f in ("summary.json", "metrics.jsonl", "config.toml")}
    ckpts_before = sorted(os.listdir(os.path.join(d, "checkpoints")))
    p5, _, _ = run_resume(args, d, [], 60, n=4)
    check(p5.returncode == 0 and "has already finished" in p5.stderr and "--set run.total_env_steps=" in p5.stderr,
          f"resuming a finished run is a no-op that says how to extend it (exit {p5.returncode})")
    check(all(open(os.path.join(d, f), "rb").read() == b for f, b in before.items())
          and sorted(os.listdir(os.path.join(d, "checkpoints"))) == ckpts_before, "nothing in the run changed")
    check(not os.path.exists(os.path.join(d, "replay.pid")), "replay.pid removed at exit")

    for c in glob.glob(os.path.join(d, "checkpoints", "ckpt-*")):
        if os.path.exists(os.path.join(c, "COMPLETE")):
            os.unlink(os.path.join(c, "COMPLETE"))
    p4, _, _ = run_resume(args, d, [], 60, n=4)
    check(p4.returncode == 2 and "no complete checkpoint" in p4.stderr, "no complete checkpoint: exit 2 naming the directory")


def bad(args, sets, key, n=4):
    p, dt, d = run(args, n, sets, 60)
    check(p.returncode == 2, f"exit code 2 (got {p.returncode})")
    check(key in p.stderr, f"message names {key!r}: {p.stderr.strip()[:300]}")
    check(p.stderr.count("config error") == 1, "one line, printed once (by rank 0)")
    check(dt < 30, f"all ranks gone in {dt:.1f} s < 30 s")
    check(not os.path.exists(d), "no run directory created")
    return p


def case_bad_unknown_key(args):
    bad(args, ["learner.lrr=0.1"], "learner.lrr")


def case_bad_wrong_type(args):
    bad(args, ["learner.batch_size=\"many\""], "learner.batch_size")


def case_bad_out_of_range(args):
    bad(args, ["learner.gamma=2.0"], "learner.gamma")
    # compressed observations on CartPole's float32 observations: refused at start by rank 0
    p = bad(args, ['actor.compress_obs="zstd"'], "actor.compress_obs")
    check("no uint8 image observations" in p.stderr, "the message says why")


def case_bad_world_size(args):
    bad(args, ["roles.learners=2"], "world size 3", n=3)


def case_bad_env_id(args):
    bad(args, ["env.id=\"Atari\""], "env.id")


def case_bad_run_dir_exists(args):
    p, dt, d = run(args, 4, ["run.total_env_steps=20000"], 120)
    check(p.returncode == 0, "first run ok")
    before = summary(d)
    out_dir = os.path.dirname(d)
    cmd = [args.mpirun, "-n", "4", "--oversubscribe", args.mpirl, "train", "--set",
           f"run.out_dir={json.dumps(out_dir)}", "--set", "run.name=\"run\""]
    t0 = time.time()
    q = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    check(q.returncode == 2 and "already exists" in q.stderr, f"second run with the same name refused: {q.stderr.strip()}")
    check(time.time() - t0 < 30, "refused within 30 s")
    check(summary(d) == before, "nothing already written was lost")


def learn(args, algo, env_sets=(), env="CartPole-v1"):
    """CartPole (or another env with the same bar, via env_sets) must reach a mean return >= 400."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    p, dt, d = run(args, 4, [*env_sets, f"learner.algo={algo}", f"run.seed={seed}", "run.total_env_steps=30000000",
                             "run.max_wall_seconds=540", "run.stop_mean_return=450", "run.log_interval_s=10"], 660)
    s = finished_run(p, d, 1)
    print(f"{env} {algo} seed {seed}: mean return {s['final_mean_return']} over the last 100 episodes after "
          f"{s['env_steps']} env steps in {s['wall_time_s']:.1f} s ({s['stop_reason']}, {s['sps']:.0f} SPS)")
    check(s["final_mean_return"] is not None and s["final_mean_return"] >= 400,
          f"{env} mean return {s['final_mean_return']} >= 400")
    dec = s.get("stop_decision", {})
    check(dec.get("reason") == s["stop_reason"], f"stop_decision names the stop reason ({dec})")
    if s["stop_reason"] == "stop_mean_return":  # the run says it reached the threshold: it did
        check(dec["mean_return"] >= 450 and dec["window_episodes"] == 100,
              f"decision mean {dec['mean_return']:.2f} over {dec['window_episodes']} episodes >= 450 "
              f"(final window {s['final_mean_return']:.2f})")
    check(s["wall_time_s"] <= 600, f"within 10 minutes ({s['wall_time_s']:.0f} s)")


def case_learn_repeat_previous(args):
    # Memory is required: a scan core must solve RepeatPreviousEasy where the MLP stays near chance
    # (-0.5), with the same env-step budget. MPIRL_CORES adds more cores to the report.
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    budget = int(os.environ.get("MPIRL_BUDGET", "2000000"))
    cores = os.environ.get("MPIRL_CORES", "lru none").split()
    results = {}
    for core in cores:
        # PopArt (the default) off: with it the LRU reached 0.76-0.83 instead of 0.86-0.87 at 2M
        # steps (seeds 1, 2); this test is about memory, not value normalisation.
        p, dt, d = run(args, 4, ["env.id=\"RepeatPreviousEasy\"", f"model.core=\"{core}\"", f"run.seed={seed}",
                                 "learner.value_norm=\"none\"",
                                 f"run.total_env_steps={budget}", "run.log_interval_s=10"], 900)
        s = finished_run(p, d, budget)
        results[core] = s
        print(f"core {core}: mean return {s['final_mean_return']:.3f} after {s['env_steps']} env steps in "
              f"{s['wall_time_s']:.1f} s ({s['sps']:.0f} SPS)")
    for core, s in results.items():
        print(f"RESULT RepeatPreviousEasy seed {seed} core {core}: {s['final_mean_return']:.3f} "
              f"({s['env_steps']} steps, {s['wall_time_s']:.1f} s)")
    if "lru" in results:
        check(results["lru"]["final_mean_return"] >= 0.8, f"lru reaches >= 0.8 ({results['lru']['final_mean_return']:.3f})")
    if "none" in results:
        check(results["none"]["final_mean_return"] <= -0.3,
              f"the MLP stays <= -0.3 with the same budget ({results['none']['final_mean_return']:.3f})")


CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs")


def learn_to(args, label, sets, threshold, accept, budget, config=None):
    """Trains until the mean return of 100 episodes reaches `threshold` (run.stop_mean_return) or
    `budget` env steps; passes when the final mean return is >= `accept` (set below the measured
    seeds' results, with margin). The env-step budget decides, not the clock: the wall-clock limit
    only guards against a hang."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    cfg = os.path.join(CONFIGS, config) if config else None
    p, dt, d = run(args, 4, [*sets, f"run.seed={seed}", f"run.total_env_steps={budget}", "run.max_wall_seconds=1500",
                             f"run.stop_mean_return={threshold}", "run.log_interval_s=5"], 1700, config=cfg)
    s = finished_run(p, d, 1)
    r = s["final_mean_return"]
    print(f"RESULT {label} seed {seed}: mean return {r} over the last 100 episodes after {s['env_steps']} env steps "
          f"in {s['wall_time_s']:.1f} s ({s['stop_reason']}, {s['sps']:.0f} SPS)")
    check(r is not None and r >= accept, f"{label}: mean return {r} >= {accept}")
    dec = s.get("stop_decision", {})
    check(dec.get("reason") == s["stop_reason"], f"stop_decision names the stop reason ({dec})")
    if s["stop_reason"] == "stop_mean_return":  # the run says it reached the threshold: it did
        check(dec["mean_return"] >= threshold and dec["window_episodes"] == 100,
              f"decision mean {dec['mean_return']:.2f} over {dec['window_episodes']} episodes >= {threshold}")
    return s


def case_learn_pendulum(args):
    # configs/pendulum.toml (APPO, observation normalisation, PopArt): -250 within 2M env steps.
    learn_to(args, "Pendulum-v1", [], -250, -400, 2000000, config="pendulum.toml")


def case_learn_synthetic_defaults(args):
    # The defaults (no config file) on the Synthetic contextual bandit: 4 actions, 200 steps, chance 50.
    # Runs are asynchronous, so seed 1 does not repeat itself: with one action dead (P < 0.01) a run
    # ends near 138, with two near 96 (96.45 once in CI, 97 in bench runs); 110-172 otherwise. The
    # bound, 80, is well above chance and below the two-dead-actions plateau.
    learn_to(args, "Synthetic (defaults)", ['env.id="Synthetic"'], 190, 80, 2000000)


def impala_under_lag(args, what, budget, extra):
    """CartPole with IMPALA at a policy lag near 27 updates (14 actors gave that lag on a 16-core
    machine), run past 475 to `budget` env steps; returns the metrics rows. The replay
    holds at least 23 batches before it samples (min_size_to_sample), so the lag does not depend on
    which of learner and actors is faster; the learner is pinned to the CPU all the same."""
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    p, dt, d = run(args, 4, [f"run.seed={seed}", "replay.capacity=768", "replay.min_size_to_sample=736",
                             'learner.device="cpu"', f"run.total_env_steps={budget}", "run.max_wall_seconds=600",
                             "run.log_interval_s=0.5"] + extra, 700)
    s = finished_run(p, d, budget)
    with open(os.path.join(d, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    lags = sorted(r["policy_lag_mean"] for r in rows if r.get("policy_lag_mean"))
    lag = lags[len(lags) // 2] if lags else 0.0
    r = s["final_mean_return"]
    print(f"RESULT IMPALA {what}, policy lag {lag:.1f} (median), seed {seed}: mean return {r} after "
          f"{s['env_steps']} env steps ({s['stop_reason']})")
    check(lag >= 20, f"the run had the policy lag it is about: median {lag:.1f} >= 20 updates")
    check(s["stop_reason"] == "total_env_steps", f"ran to its step budget ({s['stop_reason']})")
    best = max((x["mean_return"] for x in rows if x.get("mean_return") is not None), default=0)
    check(best >= 475, f"solved it at some point: best 100-episode mean {best} >= 475")
    # A collapse ends at about 9 (a deterministic policy).
    check(r is not None and r >= 100, f"not collapsed at the end: mean return {r} >= 100")
    return rows


def case_learn_impala_holds_under_lag(args):
    # The defaults, 6M steps. With the IMPALA paper's policy-gradient clip (learner.pg_rho_bar=1, the
    # old default) this run ended at a return of 9 (5 of 5 seeds without min_size_to_sample); with 10,
    # 4 of 4 seeds ended at 500, and a dip went no lower than 170, and recovered.
    impala_under_lag(args, "defaults", 6000000, [])


def case_learn_impala_eps_holds_long(args):
    # learner.eps=0.01, docs/algorithms.md's advice for long IMPALA runs at a high lag, 20M steps: the defaults
    # ended at 9 in 4 of 12 seeds and fell below 100 in 9; with eps 0.01 none of 12 fell below 100 after
    # its first 475 (lowest 161-488; seed 1: 478, from metrics every 0.05 s; this test reads them every
    # 0.5 s). Checks the lowest 100-episode mean after the first 475, too.
    rows = impala_under_lag(args, "eps 0.01", 20000000, ["learner.eps=0.01"])
    means = [x["mean_return"] for x in rows if x.get("mean_return") is not None]
    first = next(i for i, m in enumerate(means) if m >= 475)
    low = min(means[first:])
    print(f"RESULT lowest 100-episode mean after the first 475: {low}")
    check(low >= 100, f"never fell below 100 after solving it: lowest {low} >= 100")


def case_learn_cartpole_impala(args):
    learn(args, "impala")


def case_learn_cartpole_appo(args):
    learn(args, "appo")


def main(cases=None):
    """Runs the case named on the command line from `cases` (a module's globals; default: these)."""
    cases = cases if cases is not None else globals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirl", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--workdir", default="test-runs")
    ap.add_argument("case")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    fn = cases.get("case_" + args.case)
    if fn is None:
        raise SystemExit(f"unknown case {args.case}")
    fn(args)
    print("PASSED", args.case)


if __name__ == "__main__":
    main()
