#!/usr/bin/env python3
"""TensorBoard event files of a real `mpirun ... mpirl train`, read back with the tensorboard
package's own readers (its record reader checks every length and data CRC-32C): while the run goes
on (each row is flushed), and at the end against metrics.jsonl row by row (scalars), config.toml
(the text summary) and the recent-returns window (the histogram); `run.tensorboard = false` writes
none. Run one case: tb_readback.py --mpirl build/mpirl CASE."""
import glob
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import tomllib
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi"))
import mpi_test  # noqa: E402
from mpi_test import check, command, config_of, run  # noqa: E402

from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402
from tensorboard.backend.event_processing import event_file_loader  # noqa: E402

# About 3 s of CartPole with a row every 0.2 s (a step budget would last a machine-dependent time).
SHORT = ["run.total_env_steps=1000000000", "run.max_wall_seconds=3", "run.log_interval_s=0.2", "env.num_envs=8",
         "replay.dump=\"never\"", "run.checkpoint=\"never\""]
NAME = re.compile(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)$")


def event_files(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))


def raw_events(path):
    """Every Event in the file, in order, through tensorboard's record reader (CRC-checked)."""
    return list(event_file_loader.LegacyEventFileLoader(path).Load())


def scalar_events(events):
    return [e for e in events if e.HasField("summary") and any(v.HasField("simple_value") for v in e.summary.value)]


def numeric(row):
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def nan_free(x):
    """x with NaN floats as the string "nan" (run.stop_mean_return = nan), so that == compares them."""
    if isinstance(x, dict):
        return {k: nan_free(v) for k, v in x.items()}
    return "nan" if isinstance(x, float) and math.isnan(x) else x


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))  # scalars are float32


def case_training_run(args):
    out_dir = os.path.join(args.workdir, f"tb-{uuid.uuid4().hex[:8]}")
    d = os.path.join(out_dir, "run")
    t0 = time.time()
    p = subprocess.Popen(command(args, 3, SHORT, out_dir), env=mpi_test.ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    # Live: once metrics.jsonl holds two rows, the first row's scalars are already readable.
    live_rows, live_scalars = 0, 0
    while p.poll() is None and time.time() - t0 < 120:
        metrics = os.path.join(d, "metrics.jsonl")
        rows = sum(1 for _ in open(metrics)) if os.path.exists(metrics) else 0
        if rows >= 2 and event_files(d):
            live_rows, live_scalars = rows, len(scalar_events(raw_events(event_files(d)[0])))
            break
        time.sleep(0.05)
    out, _ = p.communicate(timeout=180)
    sys.stdout.write(out[-3000:].replace("\r", "\n"))
    check(p.returncode == 0, f"the run finished (exit {p.returncode}) in {time.time() - t0:.1f} s")
    check(live_rows >= 2 and live_scalars >= live_rows - 1,
          f"readable while the run went on: {live_scalars} scalar events when metrics.jsonl had {live_rows} rows")

    files = event_files(d)
    check(len(files) == 1, f"one event file in the run directory: {[os.path.basename(f) for f in files]}")
    m = NAME.search(os.path.basename(files[0]))
    check(m is not None and m.group(2) == socket.gethostname() and abs(int(m.group(1)) - t0) < 300,
          f"file name events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>: {os.path.basename(files[0])}")
    events = raw_events(files[0])
    check(events[0].file_version == "brain.Event:2", f"first record: file_version {events[0].file_version!r}")

    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    rows = [json.loads(line) for line in open(os.path.join(d, "metrics.jsonl"))]
    check(len(rows) >= 3, f"{len(rows)} metrics rows")

    # Scalars: one per number of each row, in order, at step = the row's env steps.
    want_tags = {"train/" + k for r in rows for k in numeric(r)}
    check(set(tags["scalars"]) == want_tags, f"scalar tags = the rows' numeric keys: {sorted(tags['scalars'])}")
    for key in sorted({k for r in rows for k in numeric(r)}):
        want = [(r["env_steps"], r[key]) for r in rows if key in numeric(r)]
        got = [(s.step, s.value) for s in acc.Scalars("train/" + key)]
        ok = len(got) == len(want) and all(gs == ws and close(gv, wv) for (gs, gv), (ws, wv) in zip(got, want))
        check(ok, f"train/{key}: {len(got)} values match metrics.jsonl" + ("" if ok else f": {got[:5]} vs {want[:5]}"))
    check("train/mean_return" in want_tags and "train/loss_total" in want_tags and "train/sps" in want_tags,
          "mean_return, losses and SPS are among them")

    # The config as text (the text plugin's string tensor), equal to config.toml.
    check(tags["tensors"] == ["config"], f"one text summary: {tags['tensors']}")
    check(acc.SummaryMetadata("config").plugin_data.plugin_name == "text", "its plugin is 'text'")
    texts = acc.Tensors("config")
    t = texts[0].tensor_proto
    check(len(texts) == 1 and t.dtype == 7 and len(t.string_val) == 1, "written once, a DT_STRING tensor")
    md = t.string_val[0].decode()
    check(md.startswith("```toml\n") and md.endswith("```"), "a TOML code block")
    check(nan_free(tomllib.loads(md[len("```toml\n"):-3])) == nan_free(config_of(d)), "its TOML is config.toml")

    # The recent-returns window as a histogram with every row that had finished episodes.
    hists = acc.Histograms("train/episode_return")
    with_episodes = [r for r in rows if r["mean_return"] is not None]
    check(len(hists) == len(with_episodes) > 0, f"{len(hists)} histograms for {len(with_episodes)} rows with episodes")
    for h, r in zip(hists, with_episodes):
        v = h.histogram_value
        n = min(100, r["episodes"])
        ok = (h.step == r["env_steps"] and v.num == n and sum(v.bucket) == n and close(v.sum / v.num, r["mean_return"])
              and v.min <= r["mean_return"] <= v.max and v.bucket_limit[-1] == v.max)
        check(ok, f"step {h.step}: {v.num:.0f} returns in [{v.min}, {v.max}], mean {v.sum / v.num:.3f} = "
                  f"mean_return {r['mean_return']:.3f} over the last {n} of {r['episodes']} episodes")


def case_disabled(args):
    p, dt, d = run(args, 3, ["run.total_env_steps=5000", "run.tensorboard=false"], 120)
    check(p.returncode == 0 and os.path.exists(os.path.join(d, "metrics.jsonl")), "the run finished with metrics")
    check(not event_files(d), "run.tensorboard = false: no event file")


if __name__ == "__main__":
    mpi_test.main(globals())
