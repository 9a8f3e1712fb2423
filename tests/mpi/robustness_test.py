#!/usr/bin/env python3
"""A run keeps what it learned (issue 33): real mpirun, real ranks.
  nan_stop            NaN injected into the loss from update 40 (MPIRL_TEST_NAN_AT_UPDATE, a test hook):
                      learner.on_nonfinite = "stop" ends the run (exit 4, stop_reason "nonfinite"),
                      model.pt and the final checkpoint hold finite parameters, the hook is announced
                      in the log and listed in summary.json
  nan_skip_limit      "skip": the NaN steps are skipped and counted; nonfinite_limit in a row stop the run
  nan_rollback        "rollback": back to the last finite state 3 times, the learning rate halved each
                      time, then a stop
  best_policy         model_best.pt beside model.pt, the best 100-episode mean so far, playable by mpirl eval
  concurrent_resume   --resume of a run that is still going on is refused (its replay is alive on this
                      host), and the live run is not disturbed
  eval_after_rebuild  evaluations during training go on after the mpirl binary is replaced on disk
                      (a rebuild or reinstall during a long run)
  corrupt_checkpoints the newest checkpoint's replay.h5 has a flipped byte, the one before holds NaN
                      weights with CRCs that match (as an older mpirl could seal): --resume names both,
                      sets them aside, resumes from the third and finishes; with keep_checkpoints = 1
                      the resumed run's own checkpoints are kept (the rejected ones no longer count)
Run one: robustness_test.py --mpirl build/mpirl CASE"""
import glob
import signal
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, summary  # noqa: E402


def finite_model(path):
    import torch
    sd = torch.jit.load(path, map_location="cpu").state_dict()
    return len(sd) > 0 and all(bool(torch.isfinite(t).all()) for t in sd.values())


def nan_run(args, policy, at, extra=()):
    sets = ["run.total_env_steps=100000000", f'learner.on_nonfinite="{policy}"', "run.log_interval_s=0.5", *extra]
    env = dict(mpi_test.ENV, MPIRL_TEST_NAN_AT_UPDATE=str(at))
    out_dir = os.path.join(args.workdir, f"r-{os.getpid()}-{policy}")
    cmd = mpi_test.command(args, 4, sets, out_dir)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    out = p.stdout + p.stderr
    sys.stdout.write(out[-3000:].replace("\r", "\n"))
    d = os.path.join(out_dir, "run")
    s = summary(d)
    check(p.returncode == 4 and s["stop_reason"] == "nonfinite", f"exit 4, stop_reason nonfinite "
          f"(exit {p.returncode}, {s['stop_reason']})")
    nf = s["nonfinite"]
    check(nf["policy"] == policy and nf["skipped_steps"] >= 1 and nf["first_seen_by_update"] >= at
          and nf["parameters_finite"], f"summary.json's nonfinite: {nf}")
    check(finite_model(os.path.join(d, "model.pt")), "model.pt holds finite parameters")
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(ckpts and os.path.exists(os.path.join(ckpts[-1], "COMPLETE")) and finite_model(os.path.join(ckpts[-1], "model.pt")),
          f"the final checkpoint {os.path.basename(ckpts[-1]) if ckpts else None} holds finite parameters")
    check("test hook MPIRL_TEST_NAN_AT_UPDATE=" in out and f"MPIRL_TEST_NAN_AT_UPDATE={at}" in s["test_hooks"],
          f"the hook is announced and listed ({s['test_hooks']})")
    check("stopping:" in out and "non-finite" in out, "the log says why it stopped")
    return s


def case_nan_stop(args):
    s = nan_run(args, "stop", 40)
    check(s["learner_updates"] >= 40 and s["nonfinite"]["skipped_steps"] <= 16,
          f"stopped at the first check after the NaN ({s['learner_updates']} updates, "
          f"{s['nonfinite']['skipped_steps']} skipped)")


def case_nan_skip_limit(args):
    s = nan_run(args, "skip", 40, ["learner.nonfinite_limit=20"])
    nf = s["nonfinite"]
    check(20 <= nf["in_a_row_at_end"] <= 20 + 16 and nf["rollbacks"] == 0,
          f"went on skipping until 20 in a row ({nf['in_a_row_at_end']} at the end)")


def case_nan_rollback(args):
    # 256 healthy updates first: the guard keeps a snapshot every 256 finite ones.
    s = nan_run(args, "rollback", 300, ["learner.nonfinite_limit=20"])
    nf = s["nonfinite"]
    check(nf["rollbacks"] == 3 and abs(nf["lr_factor"] - 0.125) < 1e-12,
          f"3 rollbacks, learning rate x0.125 ({nf['rollbacks']}, x{nf['lr_factor']})")


def case_best_policy(args):
    p, dt, d = mpi_test.run(args, 4, ["run.total_env_steps=400000", "run.log_interval_s=0.25"], 300)
    s = mpi_test.finished_run(p, d, 400000)
    best = s["best_policy"]
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
    full = [r["mean_return"] for r in rows if r.get("mean_return") is not None and r["episodes"] >= 100]
    # Each row whose window holds 100 episodes is checked against the best (run_controller.cpp): the
    # best kept is exactly the best of those rows (written to metrics.jsonl separately).
    check(best is not None and best["source"].startswith("train") and abs(best["mean_return"] - max(full)) < 1e-6
          and 0 < best["update"] <= s["learner_updates"],
          f"best policy: mean {best and best['mean_return']} at update {best and best['update']} = the best of "
          f"{len(full)} rows with 100 episodes ({max(full):.4f})")
    path = os.path.join(d, "model_best.pt")
    check(os.path.exists(path) and finite_model(path), "model_best.pt written, finite")
    e = subprocess.run([args.mpirl, "eval", path, "--episodes", "2"], capture_output=True, text=True, timeout=120)
    print(e.stdout, e.stderr)
    check(e.returncode == 0 and "mean return" in e.stdout, "mpirl eval plays model_best.pt")


def case_concurrent_resume(args):
    import signal
    out_dir = os.path.join(args.workdir, f"r-{os.getpid()}-live")
    cmd = mpi_test.command(args, 4, ["run.total_env_steps=1000000000", "run.checkpoint_every_updates=20",
                                     "run.checkpoint_interval_s=0", "run.log_interval_s=0.5"], out_dir)
    d = os.path.join(out_dir, "run")
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        check(mpi_test.wait_for_rows(d, 3, 120) and mpi_test.wait_checkpoint(d, 120), "a live run with a checkpoint")
        rows_before = sum(1 for _ in open(os.path.join(d, "metrics.jsonl")))
        r = subprocess.run([args.mpirun, "-n", "4", "--oversubscribe", args.mpirl, "train", "--resume", d],
                           env=mpi_test.ENV, capture_output=True, text=True, timeout=120)
        print(r.stdout[-1500:], r.stderr[-1500:])
        check(r.returncode == 2 and "its replay rank is running" in r.stderr,
              f"the second --resume is refused (exit {r.returncode})")
        rows_after = sum(1 for _ in open(os.path.join(d, "metrics.jsonl")))
        check(rows_after >= rows_before, f"metrics.jsonl kept its {rows_before} rows ({rows_after} now)")
        proc.send_signal(signal.SIGUSR1)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    check(proc.returncode == 75, f"the live run ended as it was asked to (exit {proc.returncode})")


def case_eval_after_rebuild(args):
    import shutil
    import time
    out_dir = os.path.join(args.workdir, f"r-{os.getpid()}-rebuild")
    os.makedirs(out_dir, exist_ok=True)
    exe = os.path.join(out_dir, "mpirl")
    shutil.copy2(args.mpirl, exe)
    a = type(args)(**{**vars(args), "mpirl": exe})
    cmd = mpi_test.command(a, 3, ["run.total_env_steps=1000000000", "eval.interval_s=0.5", "eval.episodes=1",
                                  "run.log_interval_s=0.5"], out_dir)
    d = os.path.join(out_dir, "run")
    results = lambda: sum(1 for _ in open(os.path.join(d, "eval.jsonl"))) if os.path.exists(  # noqa: E731
        os.path.join(d, "eval.jsonl")) else 0
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        t0 = time.time()
        while results() < 1 and time.time() - t0 < 180:
            time.sleep(0.2)
        check(results() >= 1, "a first evaluation")
        os.remove(exe)  # as a rebuild replaces it: the running ranks' binary is now "(deleted)"
        shutil.copy2(args.mpirl, exe + ".new")
        os.rename(exe + ".new", exe)
        n = results()
        while results() < n + 2 and time.time() - t0 < 300:
            time.sleep(0.2)
        check(results() >= n + 2, f"two more evaluations after the binary was replaced ({results() - n})")
        proc.send_signal(signal.SIGUSR1)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    check("cannot start" not in out, "no evaluation failed to start")
    check(proc.returncode == 75, f"stopped as asked (exit {proc.returncode})")


def nan_weights(ckpt):
    """Every floating-point tensor of learner.pt and model.pt set to NaN, and COMPLETE's sizes and
    CRCs made to match: a checkpoint that is complete, verifies, and cannot be trained on."""
    import torch
    import zlib
    done_path = os.path.join(ckpt, "COMPLETE")
    done = json.load(open(done_path))
    for f in ("learner.pt", "model.pt"):
        path = os.path.join(ckpt, f)
        m = torch.jit.load(path, map_location="cpu")
        with torch.no_grad():
            for t in m.state_dict().values():
                if t.is_floating_point():
                    t.fill_(float("nan"))
        m.save(path)
        data = open(path, "rb").read()
        done["files"][f] = {"bytes": len(data), "crc32": zlib.crc32(data) & 0xFFFFFFFF}
    json.dump(done, open(done_path, "w"), indent=2)


def case_corrupt_checkpoints(args):
    p, dt, d = mpi_test.run(args, 4, ["run.total_env_steps=300000", "run.checkpoint_interval_s=0",
                                      "run.checkpoint_every_updates=50", "run.keep_checkpoints=3"], 240)
    mpi_test.finished_run(p, d, 300000)
    ckpts = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    check(len(ckpts) == 3, f"3 checkpoints kept ({len(ckpts)})")
    flipped, nan, good = ckpts[-1], ckpts[-2], ckpts[-3]
    h5 = os.path.join(flipped, "replay.h5")
    with open(h5, "r+b") as f:  # a byte in the middle of the file: same size, other CRC
        f.seek(os.path.getsize(h5) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x01]))
    nan_weights(nan)
    st, rs, _ = mpi_test.checkpoint_facts(good)
    budget = st["env_steps"] + 60000
    p2, _, _ = mpi_test.run_resume(args, d, [f"run.total_env_steps={budget}", "run.keep_checkpoints=1",
                                             "run.checkpoint_every_updates=20"], 300, n=4)
    mpi_test.finished_run(p2, d, budget)
    err = p2.stderr
    check(os.path.basename(flipped) in err and "replay.h5" in err and "CRC-32" in err,
          "the checkpoint with the flipped replay.h5 byte was named and skipped")
    check(os.path.basename(nan) in err and "not finite" in err, "the checkpoint with NaN weights was named and skipped")
    mpi_test.check_resumed(d, good, st, rs)
    for c in (flipped, nan):
        moved = os.path.join(d, "checkpoints", "rejected-" + os.path.basename(c))
        check(os.path.isdir(moved) and not os.path.exists(c), f"{os.path.basename(c)} set aside as rejected-...")
    left = sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))
    segs = [json.load(open(os.path.join(c, "COMPLETE")))["segment"] for c in left]
    check(len(left) == 1 and segs == [1], f"the resumed run's last checkpoint is kept ({[os.path.basename(c) for c in left]}, "
          f"segments {segs})")


if __name__ == "__main__":
    mpi_test.main(globals())
