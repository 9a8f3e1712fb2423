#!/usr/bin/env python3
"""Storage and kill tests (issue 33): real mpirun, real ranks, real file systems.
  disk_full         the run's directory on a small tmpfs (its own mount namespace) that fills up
                    after the second sealed checkpoint: metrics rows, checkpoint parts (learner.pt,
                    replay.h5), model.pt and the summary all meet ENOSPC; the run goes on, stops when
                    asked, says what it could not write, and leaves the sealed checkpoints verified;
                    once space is freed, --resume continues from the last of them to the end
  disk_nearly_full  the same with 1 MiB left: the small files fit, replay.h5 does not; the
                    checkpoints fail, model.pt is written at the end and the sealed ones stay
  kill_in_seal      learner 0 killed (SIGKILL, a test hook) inside its third seal, every file written
                    but COMPLETE: the job ends, and --resume takes the second checkpoint, ignores
                    and removes the unsealed one, and finishes with counts that add up
  kill_replay_part  the replay killed inside its third checkpoint part (replay.h5 written,
                    replay_state.json not): the same
  slow_disk         every dataset a dump, checkpoint part or restore writes or reads takes 0.5 s more
                    (MPIRL_TEST_DUMP_DELAY_MS): each takes well over 2 x run.stall_timeout_s, and
                    the run, its checkpoints and a resume from them all finish (the file work runs on
                    the replay's I/O thread and the learners hear it progress)
  hung_disk         one dataset takes 8 s (a file system that stops answering): the replay says
                    which job made no progress, the learners stop after 2 x run.stall_timeout_s,
                    learner 0 saves model.pt and a summary naming the stall, and no rank is left
Run one: storage_test.py --mpirl build/mpirl CASE (disk cases re-run themselves in a new mount
namespace: root, or a user namespace, is needed; they are skipped with a message otherwise)"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, summary, ranks_left  # noqa: E402

BASE = ["run.total_env_steps=1000000000", "run.checkpoint_every_updates=25", "run.checkpoint_interval_s=0",
        "run.keep_checkpoints=3", "run.log_interval_s=0.2", 'replay.selector="uniform"', "replay.max_times_sampled=0",
        "run.tensorboard=true"]
SETS = BASE + ["replay.capacity=512", "replay.samples_per_insert=4"]
# The replay fills fast (64 sequences of about 1.2 KB per update): by the third checkpoint replay.h5
# is several MiB, larger than what disk_nearly_full leaves.
DISK_SETS = BASE + ["replay.capacity=4096", "replay.samples_per_insert=0.5"]


def sealed(d):
    return sorted(glob.glob(os.path.join(d, "checkpoints", "ckpt-*")))


def verify_all(args, d):
    """Every sealed checkpoint passes a deep verification (each file's CRC against COMPLETE), checked
    here independently of mpirl: sizes and zlib CRC-32 recomputed from the files."""
    import zlib
    ok = True
    for c in sealed(d):
        done = json.load(open(os.path.join(c, "COMPLETE")))
        for name, f in done["files"].items():
            data = open(os.path.join(c, name), "rb").read()
            if len(data) != f["bytes"] or (zlib.crc32(data) & 0xFFFFFFFF) != f["crc32"]:
                print(f"  {c}/{name}: {len(data)} bytes, CRC {zlib.crc32(data):08x}; COMPLETE says {f}")
                ok = False
    return ok


def wait_sealed(d, n, limit_s=240):
    t0 = time.time()
    while time.time() - t0 < limit_s:
        if len([c for c in sealed(d) if os.path.exists(os.path.join(c, "COMPLETE"))]) >= n:
            return True
        time.sleep(0.1)
    return False


def resume_to_end(args, d, steps_more):
    """--resume D to a step budget STEPS_MORE past the last sealed checkpoint: the run finishes,
    resumed from that checkpoint, with model.pt and counts that add up."""
    last = sealed(d)[-1]
    st = json.load(open(os.path.join(last, "state.json")))
    budget = st["replay"]["env_steps"] + steps_more
    p, _, _ = mpi_test.run_resume(args, d, [f"run.total_env_steps={budget}", "run.checkpoint_every_updates=0"], 400, n=4)
    s = mpi_test.finished_run(p, d, budget)
    rows = [json.loads(l) for l in open(os.path.join(d, "resumed.jsonl"))]
    check(rows[-1]["checkpoint"] == last, f"resumed from the last sealed checkpoint {os.path.basename(last)} "
          f"({os.path.basename(rows[-1]['checkpoint'])})")
    check(not glob.glob(os.path.join(d, "checkpoints", ".tmp-ckpt-*")), "no unsealed checkpoint left behind")
    check(os.path.getsize(os.path.join(d, "model.pt")) > 0, "model.pt written")
    return s


# ---- disk full -------------------------------------------------------------------------------

def in_namespace(args, case):
    """Runs CASE's body inside a new mount namespace with a tmpfs at WORKDIR/tmpfs-PID."""
    if os.environ.get("MPIRL_STORAGE_INSIDE"):
        return True
    mnt = os.path.join(os.path.abspath(args.workdir), f"tmpfs-{os.getpid()}")
    os.makedirs(mnt, exist_ok=True)
    script = (f"mount -t tmpfs -o size=96m tmpfs {mnt} && exec {sys.executable} {os.path.abspath(__file__)} "
              f"--mpirl {args.mpirl} --mpirun {args.mpirun} --workdir {mnt} {case}")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        print("SKIPPED: no mount namespace here (unshare -m needs root):", probe.stderr.decode()[-300:])
        sys.exit(0)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       env=dict(os.environ, MPIRL_STORAGE_INSIDE="1"))
    os.rmdir(mnt)
    sys.exit(p.returncode)


def fill(path, leave):
    """Fills the file system of PATH until LEAVE bytes are free; returns the filler's path."""
    filler = os.path.join(path, "filler")
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    try:
        # Unbuffered: a write the full file system refuses fails here, in the loop, never later at
        # close (the run writes beside the filler, so the free space moves while it is written;
        # a buffered close once raised ENOSPC out of the helper in CI).
        f = open(filler, "wb", buffering=0)
    except OSError as e:  # already full (the run's own files filled it): what the test wants
        print(f"the file system is already full ({e}); nothing to fill")
        return None
    with f:
        left = free - leave
        chunk = b"\0" * (1 << 20)
        while left > 0:
            try:
                left -= f.write(chunk[:min(left, len(chunk))])
            except OSError:
                break
    return filler


def keep_free(path, filler, leave, stop):
    """Holds the file system at about LEAVE bytes free (within 256 KiB) until STOP is set: a run
    writing a checkpoint while the filler was written, or removing a failed one, would otherwise
    leave more or less room than the case is about."""
    with open(filler, "ab", buffering=0) as f:  # unbuffered: no failed flush at close
        while not stop.is_set():
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            try:
                if free > leave + (256 << 10):
                    f.write(b"\0" * min(free - leave, 1 << 20))
                    f.flush()
                elif free < leave:
                    os.ftruncate(f.fileno(), max(0, os.fstat(f.fileno()).st_size - (leave - free)))
            except OSError:
                pass
            time.sleep(0.005)


def disk_case(args, leave):
    mnt = args.workdir
    out_dir = os.path.join(mnt, "out")
    d = os.path.join(out_dir, "run")
    cmd = mpi_test.command(args, 4, DISK_SETS, out_dir)
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        check(wait_sealed(d, 2), "two sealed checkpoints before the disk fills")
        before = sealed(d)
        replay_pid = int(open(os.path.join(d, "replay.pid")).read().split()[0])
        fds = lambda: len(os.listdir(f"/proc/{replay_pid}/fd"))  # noqa: E731
        fds_before = fds()
        st = os.statvfs(mnt)
        print(f"before filling: {st.f_bavail * st.f_frsize / 2**20:.1f} MiB free; the run holds "
              f"{subprocess.run(['du', '-sh', d], capture_output=True, text=True).stdout.strip()}", flush=True)
        filler = fill(mnt, leave) or os.path.join(mnt, "filler")
        filled_at = time.time()
        import threading
        stop_keeping = threading.Event()
        keeper = threading.Thread(target=keep_free, args=(mnt, filler, leave, stop_keeping), daemon=True)
        keeper.start()
        rows_full = sum(1 for _ in open(os.path.join(d, "metrics.jsonl")))
        # Events, not time: the learner logs each checkpoint that fails (one is due every 25 updates).
        t0 = time.time()
        failed = 0
        lines = []
        while time.time() - t0 < 240 and failed < 2:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            failed += "checkpoint at update" in line and "failed" in line
        check(failed >= 2, f"two checkpoints failed on the full disk and the run went on ({failed})")
        # A dump that failed must not leave its file open (HDF5 keeps a file it could not flush).
        check(fds() <= fds_before, f"the replay holds no more open files than before ({fds_before} -> {fds()})")
        stop_keeping.set()
        keeper.join()
        proc.send_signal(signal.SIGUSR1)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines) + out
    sys.stdout.write(out[-5000:])
    check(proc.returncode == 75, f"stopped as asked (exit 75, preempted: requeue me) ({proc.returncode})")
    check("No space left" in out, "the log names the full disk")
    if leave == 0:
        check(out.count("rows are dropped until a write succeeds") <= 1, "a failing metrics write is logged once, not per row")
    after = sealed(d)
    check(after[:len(before)] == before, f"the sealed checkpoints stay ({len(before)} before, {len(after)} after)")
    check(verify_all(args, d), "every sealed checkpoint verifies (each file's size and CRC-32)")
    if leave > 0:
        check(os.path.getmtime(os.path.join(d, "model.pt")) >= filled_at and "model.pt not written" not in out,
              "model.pt written at the end in the space left")
    else:
        # A failed checkpoint's files are removed, which gives a few MiB back: model.pt may then fit.
        # Either it was written in full after the fill, or the log says it was not and the one
        # written before stays.
        written = os.path.getmtime(os.path.join(d, "model.pt")) >= filled_at
        check(os.path.getsize(os.path.join(d, "model.pt")) > 0 and (written or "model.pt not written" in out),
              "model.pt " + ("written at the end in space a failed checkpoint gave back" if written else
                             "could not be written, the one written before stays"))
    if os.path.exists(filler):
        os.remove(filler)
    rows = sum(1 for _ in open(os.path.join(d, "metrics.jsonl")))
    check(rows >= rows_full, f"metrics.jsonl kept its {rows_full} rows ({rows})")
    resume_to_end(args, d, 20000)


def case_disk_full(args):
    in_namespace(args, "disk_full")
    disk_case(args, 0)


def case_disk_nearly_full(args):
    in_namespace(args, "disk_nearly_full")
    disk_case(args, 1 << 20)


# ---- SIGKILL inside a seal ------------------------------------------------------------------

def kill_case(args, hook):
    out_dir = os.path.join(args.workdir, f"k-{os.getpid()}-{hook.split(':')[0]}")
    d = os.path.join(out_dir, "run")
    cmd = mpi_test.command(args, 4, SETS, out_dir)
    env = dict(mpi_test.ENV, MPIRL_TEST_KILL_AT=hook)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    out = p.stdout + p.stderr
    sys.stdout.write(out[-3000:])
    check(p.returncode != 0, f"the job ended when a rank was killed (exit {p.returncode})")
    good = [c for c in sealed(d) if os.path.exists(os.path.join(c, "COMPLETE"))]
    tmp = glob.glob(os.path.join(d, "checkpoints", ".tmp-ckpt-*"))
    check(len(good) == 2 and len(tmp) >= 1, f"two sealed checkpoints and the unsealed third ({len(good)}, {tmp})")
    check(verify_all(args, d), "the sealed ones verify")
    # What a rank killed mid-write leaves (mpirun may kill learner 0 while it writes summary.json
    # or model.pt): the resume removes it, and finished_run checks none is left.
    print("temporaries left by the kill:", [os.path.basename(f) for f in glob.glob(os.path.join(d, "*.tmp.*"))])
    with open(os.path.join(d, "summary.json.tmp.999999"), "w") as f:
        f.write('{"half": ')
    s = resume_to_end(args, d, 20000)
    check(s["env_steps"] >= 20000, "the resumed run finished")


def case_kill_in_seal(args):
    kill_case(args, "seal:3")


def case_kill_replay_part(args):
    kill_case(args, "replay_part:3")


# ---- a slow or hung disk under the replay -----------------------------------------------------

STALL_S = 1.5
SLOW_SETS = ["run.checkpoint_every_updates=40", "run.checkpoint_interval_s=0", "run.keep_checkpoints=3",
             'replay.selector="uniform"', "replay.max_times_sampled=0", "replay.capacity=512",
             "replay.samples_per_insert=4", 'replay.dump="end"', "replay.dump_interval_s=4",
             f"run.stall_timeout_s={STALL_S}", "run.log_interval_s=0.5"]


def seconds_of(out, pattern):
    import re
    return [float(x) for x in re.findall(pattern, out)]


def case_slow_disk(args):
    out_dir = os.path.join(args.workdir, f"slow-{os.getpid()}")
    d = os.path.join(out_dir, "run")
    env = dict(mpi_test.ENV, MPIRL_TEST_DUMP_DELAY_MS="500")
    steps = 60000
    cmd = mpi_test.command(args, 4, SLOW_SETS + [f"run.total_env_steps={steps}"], out_dir)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500)
    out = p.stdout + p.stderr
    sys.stdout.write(out[-3000:])
    mpi_test.finished_run(p, d, steps)
    parts = seconds_of(out, r"checkpoint part written: .*?, ([0-9.]+) s ->")
    dumps = seconds_of(out, r"replay dump \((?:interval|end of run)\): .*?, ([0-9.]+) s ->")
    print(f"checkpoint parts took {parts} s, dumps {dumps} s; the learners give up after {2 * STALL_S} s")
    check(len([x for x in parts if x > 2 * STALL_S]) >= 2,
          f"two or more checkpoint parts took longer than 2 x run.stall_timeout_s ({parts})")
    check(len([x for x in dumps if x > 2 * STALL_S]) >= 1, f"so did a dump ({dumps})")
    good = [c for c in sealed(d) if os.path.exists(os.path.join(c, "COMPLETE"))]
    check(len(good) >= 2, f"sealed checkpoints ({len(good)})")
    check(verify_all(args, d), "the sealed ones verify")
    # The resume's restore reads the same slow disk: also longer than the learners' clock.
    last = sealed(d)[-1]
    st = json.load(open(os.path.join(last, "state.json")))
    budget = st["replay"]["env_steps"] + 10000
    cmd = [args.mpirun, "-n", "4", "--oversubscribe", args.mpirl, "train", "--resume", d,
           "--set", f"run.total_env_steps={budget}", "--set", "run.checkpoint_every_updates=0"]
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500)
    out = p.stdout + p.stderr
    sys.stdout.write(out[-3000:])
    mpi_test.finished_run(p, d, budget)
    restore = seconds_of(out, r"replay: restore from checkpoint .*? done in ([0-9.]+) s")
    check(restore and restore[0] > 2 * STALL_S, f"the restore took longer than 2 x run.stall_timeout_s ({restore})")
    rows = [json.loads(l) for l in open(os.path.join(d, "resumed.jsonl"))]
    check(rows[-1]["checkpoint"] == last, "resumed from the last sealed checkpoint")


def case_hung_disk(args):
    out_dir = os.path.join(args.workdir, f"hung-{os.getpid()}")
    d = os.path.join(out_dir, "run")
    env = dict(mpi_test.ENV, MPIRL_TEST_DUMP_DELAY_MS="8000")
    cmd = mpi_test.command(args, 4, SLOW_SETS + ["run.total_env_steps=1000000000", "replay.dump_interval_s=2",
                                                 "run.checkpoint_every_updates=0"], out_dir)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    sys.stdout.write(out[-3000:])
    check(p.returncode != 0, f"the job ended with an error (exit {p.returncode})")
    check("dump (interval) has made no progress" in out, "the replay names the job that made no progress")
    check("no sign of its file work progressing" in out, "the learners stopped waiting, saying why")
    s = summary(d)
    print("summary:", {k: s.get(k) for k in ("stop_reason", "error")})
    check(s.get("stop_reason") == "error" and "no sign of its file work" in json.dumps(s),
          "summary.json names the error")
    check(os.path.getsize(os.path.join(d, "model.pt")) > 0, "learner 0 saved model.pt")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")


if __name__ == "__main__":
    mpi_test.main(globals())
