#!/usr/bin/env python3
"""MPI integration tests for mpirl, and what the other test modules share: a training run under a
real `mpirun ... mpirl train` (command, run), the checks of what it wrote (summary.json,
metrics.jsonl, model.pt, curve.jsonl) or of how it failed, checkpoints and resumes (latest_checkpoint,
checkpoint_facts, wait_checkpoint, check_resumed, run_resume), streamed output (run_streamed) and
the runner (main: a module's case_<name> functions). Its own cases, bad_*: a bad config is refused
at start (exit 2, one message naming the key, no run directory). The other cases are in jobs_test.py,
stops_test.py, terminal_test.py, self_check_test.py, resume_test.py and learning_test.py beside it.
Run one case: mpi_test.py --mpirl build/mpirl CASE."""
import argparse
import glob
import json
import os
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


def run(args, n, sets, timeout, config=None, env=None):
    name = f"t-{uuid.uuid4().hex[:8]}"
    out_dir = os.path.join(args.workdir, name)
    cmd = command(args, n, sets, out_dir, config=config)
    t0 = time.time()
    p = subprocess.run(cmd, env=env or ENV, capture_output=True, text=True, timeout=timeout)
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


def overlap(cfg):
    """Steps each rollout repeats from the one before (R2D2: its burn-in); an actor's first repeats none."""
    return cfg.get("r2d2", {}).get("burn_in", 0) if cfg["learner"]["algo"] == "r2d2" else 0


def finished_run(p, run_dir, min_steps, exit_code=0):
    """Checks a finished run against counts kept independently by the actors, the replay and the
    learners (each process counts its own; the test compares them)."""
    check(p.returncode == exit_code, f"exit code {exit_code} (got {p.returncode})")
    s = summary(run_dir)
    cfg = config_of(run_dir)
    E, T = cfg["env"]["num_envs"], cfg["actor"]["rollout_len"] - overlap(cfg)
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
          f"{r['discarded_rollouts']} rollouts x {E * T} new steps")
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


def check_curve(run_dir, s, every):
    """curve.jsonl: a row each time the env steps passed another `every` (one row per reply, however
    many points it passed), the last at the run's final env steps; its interval episode counts add
    up to the episode total, and its last 100-episode mean is the summary's."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "curve.jsonl"))]
    steps = [r["env_steps"] for r in rows]
    check(len(rows) >= s["env_steps"] // every // 2, f"{len(rows)} curve rows for {s['env_steps']} env steps")
    check(all((a // every + 1) * every <= b for a, b in zip(steps[:-2], steps[1:-1])),
          f"each curve row after the first is at or past the next multiple of {every} env steps")
    check(steps[-1] == s["env_steps"], f"the last curve row is at the run's end ({steps[-1]} = {s['env_steps']})")
    check(sum(r["interval_episodes"] for r in rows) == rows[-1]["episodes"] > 0,
          f"the intervals' episodes add up to the total ({rows[-1]['episodes']})")
    check(abs(rows[-1]["mean_return"] - s["final_mean_return"]) < 1e-6,
          f"the last curve row's 100-episode mean is the summary's ({rows[-1]['mean_return']:.3f})")


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


def ranks_left(pattern, grace_s=60):
    """The pids whose command line contains PATTERN once they have had GRACE_S to finish exiting.
    mpirun can return while a killed rank is still tearing down its address space (seconds for a
    torch process on a loaded machine; /proc still shows its command line then), so a rank counts
    as left running only if it outlives the grace. Prints what each survivor is doing."""
    t0 = time.time()
    while True:
        left = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
        if not left or time.time() - t0 > grace_s:
            break
        time.sleep(0.5)
    for pid in left:
        try:
            with open(f"/proc/{pid}/status") as f:
                state = next((l.strip() for l in f if l.startswith("State:")), "?")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
            print(f"still running after {grace_s} s: pid {pid} {state}: {cmdline}")
        except OSError:
            pass
    return left


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
    ET = cfg["env"]["num_envs"] * (cfg["actor"]["rollout_len"] - overlap(cfg))
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
    # Every finished episode is in exactly one place: learner 0's statistics, the replay's pending
    # ones, or those the replay dropped beyond its pending cap (episodes that end faster than
    # learner 0's updates collect them: short episodes, a slow learner).
    check(lr["episodes"] + rr["pending_episode_stats"] + rr["dropped_episode_stats"] == rr["episodes"],
          f"episodes: learner {lr['episodes']} + replay pending {rr['pending_episode_stats']} + dropped "
          f"{rr['dropped_episode_stats']} = replay {rr['episodes']}")


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


def case_bad_dump_path(args):
    blocker = os.path.join(args.workdir, f"file-{uuid.uuid4().hex[:8]}")
    open(blocker, "w").write("x")
    bad(args, [f"replay.dump_path={json.dumps(blocker + '/replay.h5')}"], "replay.dump_path")


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
