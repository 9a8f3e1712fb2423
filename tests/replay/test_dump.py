#!/usr/bin/env python3
"""Replay dump tests with real runs: the HDF5 schema read back with h5py and h5dump, the checksum
the run printed, restore round trips, bad restore files, a replay rank killed mid-dump, and an
image env's uint8 observations compared byte for byte with what the env returned.
Run one case: test_dump.py --mpirl build/mpirl CASE."""
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi"))
import mpi_test  # noqa: E402
from mpi_test import check, finished_run, run, summary  # noqa: E402

T = 16
RUN = ["env.id=\"RepeatPreviousEasy\"", "model.core=\"lru\"", "model.core_state=8", f"actor.rollout_len={T}",
       "replay.selector=\"prioritized\"", "replay.max_times_sampled=0", "replay.capacity=1000",
       "replay.samples_per_insert=2.0"]
# RepeatPreviousEasy has a 51-step time limit, so a T = 16 sequence has K = min(T, ceil(T / 51)) = 1
# boot slot (comm/seq_layout.h); the lru core with core_state 8 has a 16-float state (S).
K = 1
S = 16
FIELDS = ["obs", "is_init", "action", "reward", "terminated", "truncated", "logp", "dist", "boot_obs", "boot_state",
          "boot_step", "version", "actor", "env_index", "state0", "priority", "times_sampled", "insert_seq"]


def expected_schema(n):
    return {"obs": ((n, T + 1, 4), np.float32), "is_init": ((n, T + 1), np.uint8), "action": ((n, T), np.int64),
            "reward": ((n, T), np.float32), "terminated": ((n, T), np.uint8), "truncated": ((n, T), np.uint8),
            "logp": ((n, T), np.float32), "dist": ((n, T, 4), np.float32),
            "boot_obs": ((n, K, 4), np.float32), "boot_state": ((n, K, S), np.float32), "boot_step": ((n, K), np.int32),
            "version": ((n,), np.int64), "actor": ((n,), np.int32), "env_index": ((n,), np.int32),
            "state0": ((n, S), np.float32), "priority": ((n,), np.float64), "times_sampled": ((n,), np.int64),
            "insert_seq": ((n,), np.int64)}


def a_fields(f):
    v = f.attrs["fields"]
    return (v.decode() if isinstance(v, bytes) else str(v)).split(",")


def crc_of(path):
    crc = 0
    with h5py.File(path, "r") as f:
        for name in FIELDS:
            crc = zlib.crc32(np.ascontiguousarray(f["items"][name][...]).tobytes(), crc)
    return crc


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def make_dump(args, extra=()):
    p, dt, d = run(args, 4, RUN + ["run.total_env_steps=60000"] + list(extra), 240)
    s = finished_run(p, d, 60000)
    return s, d


def case_schema(args):
    s, d = make_dump(args)
    info = s["replay_dump"]
    path = info["path"]
    check(os.path.exists(path) and os.path.exists(path + ".complete"), f"dump and completion marker at {path}")
    with h5py.File(path, "r") as f:
        n = int(f.attrs["items"])
        check(n == info["items"] == s["replay"]["fill"], f"items: file {n} = printed {info['items']} = stored "
              f"{s['replay']['fill']}")
        for name, (shape, dtype) in expected_schema(n).items():
            ds = f["items"][name]
            check(ds.shape == shape and ds.dtype == dtype, f"/items/{name} {ds.shape} {ds.dtype}")
            check(ds.chunks is not None, f"/items/{name} is chunked {ds.chunks}")
        check(sorted(f["items"].keys()) == sorted(FIELDS), f"exactly the datasets {FIELDS}: {sorted(f['items'].keys())}")
        check(a_fields(f) == FIELDS, "the fields attribute lists the datasets in checksum order")
        a = f.attrs
        check(int(a["schema_version"]) == 2 and int(a["complete"]) == 1, "schema_version 2, complete")
        check(a["env_id"] == "RepeatPreviousEasy" and int(a["rollout_len"]) == T and int(a["state_size"]) == S,
              "env, rollout_len and state size attributes")
        check("[replay]" in a["config"] and "prioritized" in a["config"], "resolved config stored")
        items = f["items"]
        check(np.all(np.diff(items["insert_seq"][...]) > 0), "items in insertion order")
        check(set(np.unique(items["actor"][...])) == {2, 3}, "both actor ranks present")
        check(np.all(items["priority"][...] > 0), "priorities stored")
        check(items["times_sampled"][...].sum() > 0, "times sampled stored")
        oh = items["obs"][...]
        check(np.allclose(oh.sum(-1), 1.0), "observations are one-hot suits")
        check(set(np.unique(items["action"][...])) <= {0, 1, 2, 3}, "actions in range")
        bs = items["boot_step"][...]
        check(np.all((bs == -1) | ((bs >= 0) & (bs < T))), "boot steps are -1 (unused) or a step of the sequence")
        check(int(a["inserted"]) == s["replay"]["inserted"] and int(a["sampled"]) == s["replay"]["sampled"],
              "counters in the file match the run's")
    crc = crc_of(path)
    check(crc == info["checksum_crc32"], f"CRC-32 recomputed with numpy {crc:08x} = printed {info['checksum_crc32']:08x}")
    h = subprocess.run(["h5dump", "-H", path], capture_output=True, text=True)
    check(h.returncode == 0, "h5dump -H reads the file")
    for name in FIELDS:
        check(f'DATASET "{name}"' in h.stdout, f"h5dump -H lists {name}")
    print("\n".join(h.stdout.splitlines()[:40]))
    i = subprocess.run([args.mpirl, "replay", "inspect", path], capture_output=True, text=True)
    print(i.stdout, i.stderr)
    check(i.returncode == 0 and "verified" in i.stdout and "state0" in i.stdout, "mpirl replay inspect")


def case_restore(args):
    s, d = make_dump(args)
    path = s["replay_dump"]["path"]
    out = os.path.join(d, "again.h5")
    r = subprocess.run([args.mpirl, "replay", "roundtrip", path, out], capture_output=True, text=True)
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "restore + dump with no new data")
    with h5py.File(path, "r") as a, h5py.File(out, "r") as b:
        for name in FIELDS:
            check(np.array_equal(a["items"][name][...], b["items"][name][...]), f"/items/{name} equal")
    # A run started from the dump holds it from the start.
    p, dt, d2 = run(args, 4, RUN + ["run.total_env_steps=20000", f"replay.restore={json.dumps(path)}"], 240)
    s2 = finished_run(p, d2, 20000)
    check(s2["replay"]["restored"] == s["replay_dump"]["items"], f"restored {s2['replay']['restored']} items")
    check(s2["replay"]["inserted"] >= s2["replay"]["restored"], "restored items count as inserted")
    check(s2["learner_counts"]["restored_sampled"] > 0,
          f"the learners trained on restored items ({s2['learner_counts']['restored_sampled']} sampled)")
    # Queue mode from the same dump: the restored items are the oldest, so each is sampled exactly
    # once, as the learners count them (by insertion number), before the run ends.
    p, dt, d3 = run(args, 4, RUN + ["run.total_env_steps=20000", f"replay.restore={json.dumps(path)}",
                                    "replay.selector=\"fifo\"", "replay.max_times_sampled=1",
                                    "replay.samples_per_insert=0.0"], 240)
    s3 = finished_run(p, d3, 20000)
    lc, r3 = s3["learner_counts"], s3["replay"]
    check(lc["restored_sampled"] == r3["restored"] > 0,
          f"queue: every restored item sampled once ({lc['restored_sampled']} of {r3['restored']})")
    check(lc["lag_unknown"] == lc["restored_sampled"],
          f"restored items have no policy lag in this run ({lc['lag_unknown']} unknown, "
          f"{lc['restored_sampled']} restored)")


def bad_restore(args, path, what):
    before = sha(path) if os.path.exists(path) else None
    p, dt, d = run(args, 4, RUN + ["run.total_env_steps=20000", f"replay.restore={json.dumps(path)}"], 60)
    check(p.returncode == 2, f"exit code 2 (got {p.returncode})")
    check(path in p.stderr and what in p.stderr, f"message names the file and says {what!r}: {p.stderr.strip()[:300]}")
    check(dt < 30, f"refused in {dt:.1f} s")
    check(not os.path.exists(d), "no run directory created")
    if before:
        check(sha(path) == before, "the file is untouched")


def case_bad_restore(args):
    s, d = make_dump(args)
    good = s["replay_dump"]["path"]
    work = os.path.join(args.workdir, "bad-dumps")
    os.makedirs(work, exist_ok=True)
    bad_restore(args, os.path.join(work, "missing.h5"), "does not exist")
    text = os.path.join(work, "text.h5")
    open(text, "w").write("this is not HDF5\n")
    bad_restore(args, text, "not an HDF5 file")
    cut = os.path.join(work, "cut.h5")
    shutil.copy(good, cut)
    os.truncate(cut, os.path.getsize(good) // 2)
    bad_restore(args, cut, "truncated or corrupt")
    schema = os.path.join(work, "schema.h5")
    shutil.copy(good, schema)
    with h5py.File(schema, "a") as f:
        f.attrs["schema_version"] = np.int64(99)
    bad_restore(args, schema, "schema version 99")
    incomplete = os.path.join(work, "incomplete.h5")
    shutil.copy(good, incomplete)
    with h5py.File(incomplete, "a") as f:
        del f.attrs["complete"]
    bad_restore(args, incomplete, "incomplete")
    # A dump of another env (CartPole, same T) into the RepeatPrevious run.
    p, dt, d3 = run(args, 4, ["run.total_env_steps=20000", f"actor.rollout_len={T}", "replay.capacity=1000",
                              "model.core=\"lru\"", "model.core_state=8"], 240)
    other = summary(d3)["replay_dump"]["path"]
    bad_restore(args, other, "holds env 'CartPole-v1'")


def case_inspect_hostile(args):
    # `mpirl replay inspect` on dumps whose attributes (outside the CRC) or datasets lie: each is an
    # error naming what is wrong, exit 2, never a read past the data or an allocation of what the
    # file claims.
    s, d = make_dump(args)
    good = s["replay_dump"]["path"]
    work = os.path.join(args.workdir, "hostile-dumps")
    os.makedirs(work, exist_ok=True)

    def inspect(path, needle):
        r = subprocess.run([args.mpirl, "replay", "inspect", path], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and needle in r.stderr, f"{os.path.basename(path)}: exit {r.returncode}, "
              f"'{needle}' in: {r.stderr.strip()[:300]}")

    r = subprocess.run([args.mpirl, "replay", "inspect", good], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "the dump itself inspects")
    items = os.path.join(work, "items.h5")
    shutil.copy(good, items)
    with h5py.File(items, "a") as f:
        f.attrs["items"] = np.int64(int(f.attrs["items"]) * 10)
    inspect(items, "but the header says")
    tlen = os.path.join(work, "rollout_len.h5")
    shutil.copy(good, tlen)
    with h5py.File(tlen, "a") as f:
        f.attrs["rollout_len"] = np.int64(int(f.attrs["rollout_len"]) + 7)
    inspect(tlen, "but the header says")
    f32 = os.path.join(work, "priority_f32.h5")
    shutil.copy(good, f32)
    with h5py.File(f32, "a") as f:
        p = f["items/priority"][...]
        del f["items/priority"]
        f.create_dataset("items/priority", data=p.astype(np.float32))
        # and the checksum made to match (an attribute too: the CRC alone does not make a file safe)
        crc = 0
        for name in a_fields(f):
            crc = zlib.crc32(np.ascontiguousarray(f["items/" + name][...]).tobytes(), crc)
        f.attrs["checksum_crc32"] = np.int64(crc)
    inspect(f32, "priority is float32")
    huge = os.path.join(work, "huge.h5")
    shutil.copy(good, huge)
    with h5py.File(huge, "a") as f:
        del f["items/reward"]
        f.create_dataset("items/reward", shape=(2 ** 40,), dtype=np.float32)  # declared, never written
    inspect(huge, "more than the")


def case_kill_mid_dump(args):
    os.environ["MPIRL_TEST_DUMP_DELAY_MS"] = "150"
    mpi_test.ENV["MPIRL_TEST_DUMP_DELAY_MS"] = "150"
    name = f"kill-{os.getpid()}"
    out_dir = os.path.join(args.workdir, name)
    cmd = mpi_test.command(args, 4, RUN + ["replay.dump_interval_s=0.2", "run.total_env_steps=100000000"], out_dir,
                           mpirun_flags=("-x", "MPIRL_TEST_DUMP_DELAY_MS"))
    proc = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    d = os.path.join(out_dir, "run")
    dump = os.path.join(d, "replay.h5")
    t0 = time.time()
    killed = False
    try:
        # Wait for one complete dump, then for the next one to be mid-write, and kill the replay.
        while time.time() - t0 < 120 and not os.path.exists(dump):
            time.sleep(0.05)
        check(os.path.exists(dump), "a first complete dump appeared")
        while time.time() - t0 < 120:
            tmps = glob.glob(dump + ".tmp.*")
            if tmps and os.path.getsize(tmps[0]) > 0:
                pid = int(open(os.path.join(d, "replay.pid")).read())
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.01)
        check(killed, "killed the replay rank while a dump was being written")
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(proc.stdout.read()[-2000:])
    check(proc.returncode != 0, f"the job failed (exit {proc.returncode}) instead of hanging")
    i = subprocess.run([args.mpirl, "replay", "inspect", dump], capture_output=True, text=True)
    print(i.stdout[:600], i.stderr)
    check(i.returncode == 0 and "verified" in i.stdout, "the last complete dump is intact and verifies")
    with h5py.File(dump, "r") as f:
        check(int(f.attrs["complete"]) == 1, "it is marked complete")
    left = glob.glob(dump + ".tmp.*")
    check(len(left) >= 1, f"the interrupted dump is left under a temporary name: {left}")
    for t in left:
        r = subprocess.run([args.mpirl, "replay", "inspect", t], capture_output=True, text=True)
        check(r.returncode != 0, f"{os.path.basename(t)} does not pass as complete: {r.stderr.strip()[:200]}")


def case_pixels_round_trip(args):
    """A Python image env (tests/python/mpirl_test_envs.py `pixels`: uint8 [3, 12, 12], each image
    a function of its env index and a per-env counter stored in its first bytes) through actor,
    wire, replay and dump: every stored observation, boot observations included, equals the image
    the env returned for that counter, byte for byte, and consecutive counters show no observation
    lost, repeated or faked by an auto-reset step. Twice: observations compressed on the wire
    (actor.compress_obs = "zstd", comm/rollout_codec.h, decoded by the replay) and plain."""
    for mode in ("zstd", "none"):
        print(f"== actor.compress_obs = {mode}")
        pixels_round_trip(args, mode)


def pixels_round_trip(args, mode):
    pydir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
    sys.path.insert(0, pydir)
    import mpirl_test_envs as te
    mpi_test.ENV["PYTHONPATH"] = pydir + os.pathsep + os.environ.get("PYTHONPATH", "")
    Tp = 8
    p, dt, d = run(args, 4, ['env.id="py:mpirl_test_envs:pixels"', "env.num_envs=4", f"actor.rollout_len={Tp}",
                             "replay.selector=\"uniform\"", "replay.max_times_sampled=0", "replay.capacity=400",
                             "run.total_env_steps=8000", f'actor.compress_obs="{mode}"'], 240)
    s = finished_run(p, d, 8000)
    m = re.search(r"replay: (\d+) rollouts arrived with compressed observations: ([0-9.]+) MB for ([0-9.]+) MB decoded",
                  p.stdout + p.stderr)
    if mode == "zstd":  # (these images are noise-like: zstd gains nothing on them, Atari's gain 100x+)
        r = s["replay"]
        check(m is not None and int(m.group(1)) == r["rollouts"] + r["discarded_rollouts"],
              f"every rollout arrived compressed ({m and m.group(0)}; {r['rollouts']} + {r['discarded_rollouts']})")
    else:
        check(m is None, "no compression reported with actor.compress_obs = \"none\"")
    path = s["replay_dump"]["path"]
    with h5py.File(path, "r") as f:
        items = f["items"]
        n = int(f.attrs["items"])
        check(n > 0 and f.attrs["obs_dtype"] == "uint8", f"{n} items, obs_dtype {f.attrs['obs_dtype']}")
        for name, lead in (("obs", Tp + 1), ("boot_obs", (Tp + 1) // 2)):
            ds = items[name]
            check(ds.dtype == np.uint8 and ds.shape == (n, lead, 3, 12, 12), f"/items/{name} {ds.dtype} {ds.shape}")
            check(ds.compression == "gzip", f"/items/{name} is compressed ({ds.compression})")
        obs, init = items["obs"][...], items["is_init"][...]
        trunc, term = items["truncated"][...], items["terminated"][...]
        bobs, bstep, env = items["boot_obs"][...], items["boot_step"][...], items["env_index"][...]
        items_actor = items["actor"][...]
        crc = 0
        for name in a_fields(f):
            crc = zlib.crc32(np.ascontiguousarray(items[name][...]).tobytes(), crc)
        check(crc == int(f.attrs["checksum_crc32"]), "the checksum over the stored bytes matches")
    actor = items_actor
    salts = {}  # actor rank -> the salt its env process put into every image
    bad_images, bad_steps, boots, mixed = 0, 0, 0, 0
    for i in range(n):
        c = [te.image_counter(obs[i, t]) for t in range(Tp + 1)]
        salt = int(salts.setdefault(int(actor[i]), obs[i, 0].reshape(-1)[5]))
        mixed += sum(int(obs[i, t].reshape(-1)[5]) != salt for t in range(Tp + 1))
        bad_images += sum(not np.array_equal(obs[i, t], te.pixel_image(int(env[i]), c[t], salt)) for t in range(Tp + 1))
        # SAME_STEP: an ended episode's last image (counter + 1) went to info["final_obs"], the reset
        # image (counter + 2) starts the next episode with is_init.
        bad_steps += sum(c[t + 1] - c[t] != (2 if init[i, t + 1] else 1) or bool(init[i, t + 1]) != bool(trunc[i, t] or term[i, t])
                         for t in range(Tp))
        for k in np.nonzero(bstep[i] >= 0)[0]:
            t = int(bstep[i, k])
            boots += 1
            fin = te.pixel_image(int(env[i]), c[t + 1] - 1, salt)
            bad_images += not (trunc[i, t] and np.array_equal(bobs[i, k], fin))
    check(bad_images == 0, f"every image equals the env's, byte for byte ({bad_images} differ)")
    check(bad_steps == 0, f"counters advance by 1, by 2 exactly across an episode end ({bad_steps} steps wrong)")
    check(boots > 0, f"{boots} truncation boot observations checked")
    check(mixed == 0 and len(salts) == 2 and len(set(salts.values())) == 2,
          f"each actor's images carry its own salt ({salts}), never another actor's ({mixed} mixed)")


if __name__ == "__main__":
    mpi_test.main(globals())
