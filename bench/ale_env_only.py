#!/usr/bin/env python3
"""ale-py's vector env alone: the same AtariVectorEnv that env.id = "ale:<game>" makes (same
preprocessing, sticky actions, SAME_STEP autoreset), stepped with uniform random actions in a plain
Python loop for --seconds. Prints one JSON line with the steps per second. bench/atari_throughput.sh
runs one per actor process, as Sample Factory's table measures its sampling ceiling."""
import argparse
import json
import time

import numpy as np
from ale_py.vector_env import AtariVectorEnv

p = argparse.ArgumentParser()
p.add_argument("--game", default="breakout")
p.add_argument("--num-envs", type=int, default=8)
p.add_argument("--seconds", type=float, default=10)
p.add_argument("--seed", type=int, default=0)
a = p.parse_args()
venv = AtariVectorEnv(game=a.game, num_envs=a.num_envs, repeat_action_probability=0.25, reward_clipping=False,
                      autoreset_mode="SameStep")
venv.reset(seed=a.seed)
rng = np.random.default_rng(a.seed)
n_actions = venv.single_action_space.n
steps, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < a.seconds:
    venv.step(rng.integers(0, n_actions, size=a.num_envs))
    steps += a.num_envs
dt = time.perf_counter() - t0
print(json.dumps({"env": f"ale:{a.game}", "num_envs": a.num_envs, "steps": steps, "seconds": round(dt, 3),
                  "sps": round(steps / dt, 1)}))
