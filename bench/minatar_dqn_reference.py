#!/usr/bin/env python3
"""Times the MinAtar paper's DQN (kenjyoung/MinAtar examples/dqn.py) on this machine.

The reference for issue 43's wall-time target. Its code is not in this repo: pass the path of
examples/dqn.py from a checkout of https://github.com/kenjyoung/MinAtar (it needs the `minatar`
package, which scripts/setup installs). Its settings are left as they are (5M frames, replay
start 5,000, one update of batch 32 per frame after it); only the number of frames is cut, and
the full run's wall time is extrapolated from the measured cost per frame with updates:

  est_5M = (time to the first update) + (5,000,000 - frame of the first update) * (seconds per
           frame between the first and the last update)

The replay is a plain list sampled with random.sample, so the cost per frame does not grow as
it fills. Not a test: the figure depends on the machine and on what else runs.

  bench/minatar_dqn_reference.py --dqn PATH/examples/dqn.py --game breakout --frames 40000
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dqn", required=True, help="path of kenjyoung/MinAtar's examples/dqn.py")
    ap.add_argument("--game", default="breakout")
    ap.add_argument("--frames", type=int, default=40000, help="frames to run (the reference runs 5,000,000)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", help="also write the figures here")
    a = ap.parse_args()

    if not os.path.isfile(a.dqn):
        sys.exit(f"--dqn {a.dqn}: no such file (a checkout's examples/dqn.py of kenjyoung/MinAtar)")
    # A source loader by path: the file need not end in .py (a pipe or `git show` output works too).
    loader = importlib.machinery.SourceFileLoader("minatar_dqn", a.dqn)
    dqn = importlib.util.module_from_spec(importlib.util.spec_from_loader("minatar_dqn", loader))
    loader.exec_module(dqn)
    missing = [n for n in ("NUM_FRAMES", "REPLAY_START_SIZE", "train", "dqn", "device") if not hasattr(dqn, n)]
    if missing:
        sys.exit(f"--dqn {a.dqn}: not MinAtar's dqn.py (no {', '.join(missing)})")
    import torch
    from minatar import Environment
    if a.threads:
        torch.set_num_threads(a.threads)
    full = dqn.NUM_FRAMES
    if a.frames <= dqn.REPLAY_START_SIZE + 1000:
        sys.exit(f"--frames {a.frames}: must exceed the replay start ({dqn.REPLAY_START_SIZE}) by 1000 or more")
    dqn.NUM_FRAMES = a.frames

    stamps = []  # time of every update
    train = dqn.train

    def timed_train(*args, **kw):
        stamps.append(time.perf_counter())
        return train(*args, **kw)

    dqn.train = timed_train
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        dqn.dqn(Environment(a.game), False, False, os.path.join(d, "out"))
    wall = time.perf_counter() - t0
    updates = len(stamps)
    first_frame = a.frames - updates  # one update per frame from the first on
    per_frame = (stamps[-1] - stamps[0]) / (updates - 1)
    est = (stamps[0] - t0) + (full - first_frame) * per_frame
    r = {"game": a.game, "frames": a.frames, "updates": updates, "wall_s": round(wall, 1),
         "s_per_frame_with_updates": per_frame, "frames_per_s": round(1.0 / per_frame, 1),
         "estimated_wall_s_for_%d_frames" % full: round(est), "device": str(dqn.device),
         "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
         "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    print(json.dumps(r, indent=1))
    print(f"dqn.py on {a.game}: {1.0 / per_frame:.0f} frames/s with updates; "
          f"{full:,} frames would take about {est / 3600:.1f} h here")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()
