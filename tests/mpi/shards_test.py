#!/usr/bin/env python3
"""Replay shards (roles.replays = K, issue 31): real mpirun, real ranks.
  two_shards         1 learner, 2 prioritized shards, 3 actors, a samples-per-insert limiter: counts
                     add up over the shards (the learners' received = the shards' sampled, the
                     actors' steps = the shards' stored + discarded), both shards stored and served,
                     priorities went back to their shards, the ratio held over the whole buffer, and
                     each shard's dump plus the HDF5 virtual dataset joining them open in h5py as one
                     set of datasets equal to the shards' concatenation
  shards_resume      2 uniform shards with periodic checkpoints: each checkpoint holds one replay part
                     per shard whose items add up to the replay's fill; --resume restores each shard
                     from its own part and finishes with counts that add up; a resume with another
                     roles.replays is refused with exit 2 naming the key
  bad_shards_world   roles.replays = 2 on 3 ranks: exit 2 naming the world size, no run directory
Run one: shards_test.py --mpirl build/mpirl CASE"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, summary  # noqa: E402


def check_shard_dumps(d, shards, fill):
    """The shards' end-of-run dumps and the virtual dataset learner 0 joins them into."""
    import h5py
    import numpy as np
    parts = [os.path.join(d, f"replay.shard{k}.h5") for k in range(shards)]
    counts, obs = [], []
    for p in parts:
        with h5py.File(p, "r") as f:
            counts.append(int(f.attrs["items"]))
            obs.append(f["items/obs"][...])
    check(all(n > 0 for n in counts) and sum(counts) == fill,
          f"every shard dumped its items: {counts}, together the replay's fill {fill}")
    with h5py.File(os.path.join(d, "replay.h5"), "r") as v:
        check(int(v.attrs["shards"]) == shards and int(v.attrs["items"]) == sum(counts),
              f"replay.h5 joins {int(v.attrs['shards'])} shards, {int(v.attrs['items'])} items")
        check(v["items/obs"].is_virtual and v["items/obs"].shape[0] == sum(counts),
              f"items/obs is one virtual dataset of {v['items/obs'].shape[0]} items")
        check(np.array_equal(v["items/obs"][...], np.concatenate(obs)),
              "reading it gives the shards' items in shard order, element for element")
        for name in v["items"]:
            check(v["items"][name].shape[0] == sum(counts), f"items/{name}: {v['items'][name].shape[0]} rows")


def case_two_shards(args):
    p, dt, d = mpi_test.run(args, 6, ["roles.replays=2", "replay.selector=\"prioritized\"", "replay.max_times_sampled=0",
                                      "replay.capacity=1024", "replay.samples_per_insert=2.0",
                                      "run.total_env_steps=200000"], 300)
    s = mpi_test.finished_run(p, d, 200000)
    table = {r["rank"]: r["role"] for r in s["ranks"]}
    check(table == {0: "learner", 1: "replay", 2: "replay", 3: "actor", 4: "actor", 5: "actor"}, f"rank table {table}")
    check("2 replay shards" in p.stdout + p.stderr, "learner 0 logs the shards")
    r = s["replay"]
    check(r["capacity"] == 2 * 1024, f"capacity {r['capacity']}: 1024 per shard")
    applied, stale = r["priority_updates"], r["stale_priority_updates"]
    check(applied > 0 and applied + stale <= r["sampled"], f"priority updates applied {applied} (stale {stale})")
    # Each shard's limiter keeps d_k = 2 x inserts_k - samples_k within min_size x 2 +- error_buffer
    # (min_size = B = 32, error_buffer auto = E x 2 + B = 64): [0, 128]. Over both shards the sum
    # d = 2 x inserted - sampled is then within [0, 256] items, at every moment, the end included.
    d_all = 2 * r["inserted"] - r["sampled"]
    check(0 <= d_all <= 2 * 128, f"samples per insert held over both shards: {r['sampled']} sampled for "
          f"{r['inserted']} inserted ({r['sampled'] / r['inserted']:.3f}; 2 x inserted - sampled = {d_all} in [0, 256])")
    check_shard_dumps(d, 2, r["fill"])


def case_shards_resume(args):
    sets = ["roles.replays=2", "run.total_env_steps=150000", "run.checkpoint_interval_s=0",
            "run.checkpoint_every_updates=20", "replay.selector=\"uniform\"", "replay.max_times_sampled=0",
            "replay.capacity=512"]
    p, dt, d = mpi_test.run(args, 6, sets, 300)
    s = mpi_test.finished_run(p, d, 150000)
    ckpt = mpi_test.latest_checkpoint(d)
    st, rs0, done = mpi_test.checkpoint_facts(ckpt)
    with open(os.path.join(ckpt, "replay.shard1_state.json")) as f:
        rs1 = json.load(f)
    check(all(n in done["files"] for n in ("replay.h5", "replay_state.json", "replay.shard1.h5",
                                            "replay.shard1_state.json")),
          "the final checkpoint holds a part per shard (replay.h5, replay.shard1.h5 and their states)")
    check(rs0["items"] + rs1["items"] == s["replay"]["fill"] and rs0["items"] > 0 and rs1["items"] > 0,
          f"the parts hold {rs0['items']} + {rs1['items']} items = the replay's fill {s['replay']['fill']}")
    check(st["env_steps"] == s["env_steps"] == rs0["status"]["env_steps"] + rs1["status"]["env_steps"],
          f"env steps: learner {st['env_steps']} = shard 0's {rs0['status']['env_steps']} + shard 1's "
          f"{rs1['status']['env_steps']}")

    p3, _, _ = mpi_test.run_resume(args, d, ["roles.replays=3"], 60, n=7)
    check(p3.returncode == 2 and "roles.replays changed from 2 to 3" in p3.stderr,
          f"another shard count refused with exit 2 ({p3.returncode})")

    target = st["env_steps"] + 100000
    p2, _, _ = mpi_test.run_resume(args, d, [f"run.total_env_steps={target}"], 300, n=6)
    s2 = mpi_test.finished_run(p2, d, target)
    rows = [json.loads(l) for l in open(os.path.join(d, "resumed.jsonl"))]
    parts = {r["part"]: r for r in rows if r["role"] == "replay"}
    check(set(parts) == {"replay", "replay.shard1"}, f"each shard resumed from its own part ({sorted(parts)})")
    check(parts["replay"]["replay_items"] == rs0["items"] and parts["replay.shard1"]["replay_items"] == rs1["items"]
          and parts["replay"]["replay_checksum_crc32"] == rs0["checksum_crc32"]
          and parts["replay.shard1"]["replay_checksum_crc32"] == rs1["checksum_crc32"],
          "each shard restored its part's items and CRC-32")
    check(s2["segment"] == 1 and s2["learner_updates"] > st["version"], "the run went on from the checkpoint")
    mpi_test.no_step_counted_twice(s, s2, d)
    check_shard_dumps(d, 2, s2["replay"]["fill"])


def case_bad_shards_world(args):
    mpi_test.bad(args, ["roles.replays=2"], "roles.replays = 2", n=3)


if __name__ == "__main__":
    mpi_test.main(globals())
