#!/usr/bin/env python3
"""Checkpoints, resumes and evaluation during training, in mpi_test.py's style:
  checkpoint_resume             SIGUSR1: a final checkpoint, exit 75; resumed, the run goes on from its counters
  eval_during_training          eval.interval_s: eval.jsonl, TensorBoard, model_best.pt; no evaluation left over
  resume_refusals               corrupt and partial checkpoints skipped, unsafe changes refused, a finished run
                                left as it is, no complete checkpoint an error; TensorBoard across the resume
Run one: resume_test.py --mpirl build/mpirl CASE"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import (ENV, check, check_resumed, checkpoint_facts, command, finished_run,  # noqa: E402
                      no_step_counted_twice, run, run_resume, summary, wait_checkpoint, wait_for_rows, ranks_left)


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
    # A row the earlier run wrote after the checkpoint (moved aside from metrics.jsonl) whose env steps
    # lag behind the checkpoint's (the replay's count it read was older: seen on a loaded machine) stays
    # in TensorBoard, which drops only steps past the checkpoint's.
    tb = [e.step for e in acc.Scalars("train/env_steps") if e.step != ckpt_steps]
    lagging = [x for x in stale if x < ckpt_steps]
    want = sorted([r["env_steps"] for r in map(json.loads, open(os.path.join(d, "metrics.jsonl")))
                   if r["env_steps"] != ckpt_steps] + lagging)
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
    left = ranks_left(os.path.join(d, "eval"))
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


if __name__ == "__main__":
    mpi_test.main(globals())
