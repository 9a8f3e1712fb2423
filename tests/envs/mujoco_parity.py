#!/usr/bin/env python3
"""The native MuJoCo envs (envs/mujoco_locomotion.h, ids <Name>-v4) against gymnasium's.

1. Steps: gymnasium's env plays uniform random actions; after each reset its state (qpos, qvel) is
   recorded, and mujoco_replay starts the native env from that state and takes the same actions:
   every observation, reward and terminated/truncated flag must agree (HalfCheetah runs one whole
   1000-step episode, so truncation is checked; Hopper, Walker2d and Humanoid fall, so termination
   is). A trace with one action changed must then fail, so the comparison can fail.
2. Reset noise: the first observations of many resets, gymnasium's (numpy's generator) against
   the native env's (mpirl's): per observation element, the means within 4 combined standard
   errors and the standard deviations within 15%; elements constant under the noise must be equal.

Usage: mujoco_parity.py --replay BUILD/mujoco_replay [--envs Hopper-v4,...] [--resets 1000]
"""
import argparse
import math
import subprocess
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")  # gymnasium's deprecation notes for the -v4 envs
import gymnasium as gym  # noqa: E402

# (episodes, step cap per episode): enough to cross terminations, and for HalfCheetah the limit.
PLAN = {"HalfCheetah-v4": (2, 1000), "Hopper-v4": (6, 1000), "Walker2d-v4": (6, 1000),
        "Ant-v4": (2, 250), "Humanoid-v4": (6, 1000)}


def nums(xs):
    return " ".join(repr(float(x)) for x in np.ravel(xs))


def trace(env_id, episodes, cap, seed):
    env = gym.make(env_id)
    env.action_space.seed(seed)
    data = env.unwrapped.data
    lines = [f"env {env_id}"]
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        lines.append(f"reset {nums(data.qpos)} {nums(data.qvel)} {nums(obs)}")
        for _ in range(cap):
            a = env.action_space.sample()
            obs, r, term, trunc, _ = env.step(a)
            lines.append(f"step {nums(a)} {float(r)!r} {int(term)} {int(trunc)} {nums(obs)}")
            if term or trunc:
                break
    env.close()
    return lines


def replay(binary, lines):
    return subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True)


def check_resets(binary, env_id, n, seed):
    env = gym.make(env_id)
    ref = np.array([env.reset(seed=seed + k)[0] for k in range(n)])
    env.close()
    out = subprocess.run([binary, "--resets", env_id, str(n), str(seed)], capture_output=True, text=True, check=True)
    nat = np.array([[float(x) for x in l.split()] for l in out.stdout.splitlines()])
    assert nat.shape == ref.shape, f"{env_id}: native resets {nat.shape}, gymnasium's {ref.shape}"
    bad = []
    for i in range(ref.shape[1]):
        ms, mn, ss, sn = ref[:, i].mean(), nat[:, i].mean(), ref[:, i].std(), nat[:, i].std()
        if ss < 1e-9:
            if abs(mn - ms) > 1e-5 * max(1.0, abs(ms)) or sn > 1e-6:
                bad.append(f"[{i}] constant {ms:.6g} in gymnasium, native mean {mn:.6g} std {sn:.3g}")
            continue
        se = math.sqrt((ss ** 2 + sn ** 2) / n)
        if abs(mn - ms) > 4 * se or not 0.85 < sn / ss < 1.15:
            bad.append(f"[{i}] mean {mn:.4g} vs {ms:.4g} (4 se {4 * se:.2g}), std {sn:.4g} vs {ss:.4g}")
    print(f"{env_id}: {n} resets, {ref.shape[1]} observation elements, {len(bad)} differ")
    return [f"{env_id} reset noise {b}" for b in bad]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True)
    ap.add_argument("--envs", default=",".join(PLAN))
    ap.add_argument("--resets", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    failures = []
    for k, env_id in enumerate(args.envs.split(",")):
        episodes, cap = PLAN[env_id]
        lines = trace(env_id, episodes, cap, args.seed + 100 * k)
        res = replay(args.replay, lines)
        sys.stdout.write(res.stdout)
        if res.returncode != 0:
            failures.append(f"{env_id} steps: {res.stderr.strip()}")
            continue
        # The same trace with the third step's first action element changed by 0.05 must fail.
        steps = [i for i, l in enumerate(lines) if l.startswith("step ")]
        bent = list(lines)
        f = bent[steps[2]].split()
        f[1] = repr(float(np.float32(float(f[1]) * 0.5 + 0.05)))
        bent[steps[2]] = " ".join(f)
        res = replay(args.replay, bent)
        if res.returncode == 0 or "trace line" not in res.stderr:
            failures.append(f"{env_id}: a changed action went unnoticed (rc {res.returncode}: {res.stderr.strip()})")
        failures += check_resets(args.replay, env_id, args.resets, args.seed + 100 * k)
    for f in failures:
        print("FAIL", f)
    print("mujoco_parity:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
