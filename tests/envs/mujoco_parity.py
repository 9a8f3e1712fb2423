#!/usr/bin/env python3
"""The native MuJoCo envs (envs/mujoco_locomotion.h, ids <Name>-v4) against gymnasium's.

1. Steps: gymnasium's env plays uniform random actions, a third of their elements past the bounds
   and clipped for gymnasium (the native env gets them unclipped and must clip them itself); after
   each reset its state (qpos, qvel) is recorded, and mujoco_replay starts the native env from that
   state and takes the same actions: every observation, reward and terminated/truncated flag must agree. The trace must contain what
   it is meant to check: terminations (Hopper, Walker2d, Humanoid fall) and time limits
   (HalfCheetah's whole 1000-step episodes). The action bounds must be gymnasium's.
2. Health at the edges: states set exactly on each bound of the healthy ranges and just either
   side of it (z, angle, Hopper's state range, Ant's and Humanoid's z), gymnasium's is_healthy
   against the native env's.
3. The comparison can fail: copies of the trace with one action changed, one observation element
   off by 1e-4 and one terminated flag flipped must each fail, with the message naming that.
4. Long episodes: for the envs with a trained policy in tests/envs/fixtures (TorchScript exports
   of mujoco_native suite runs: Hopper seed 6, Walker2d seed 6), gymnasium plays that policy's
   sampled actions for two episodes (up to 1000 steps, the time limit included) and the native env
   replays them as in 1: random actions fall within a few dozen steps, a learned gait does not.
5. Reset noise: the state (qpos, qvel) after many resets, gymnasium's (numpy's generator) against
   the native env's (mpirl's): per element, the means within 4 combined standard errors and the
   standard deviations within 7% (4,000 resets: about 4 standard errors of the ratio).

Usage: mujoco_parity.py --replay BUILD/mujoco_replay [--envs Hopper-v4,...] [--resets 1000]
"""
import argparse
import math
import os
import subprocess
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")  # gymnasium's deprecation notes for the -v4 envs
import gymnasium as gym  # noqa: E402

# (episodes, step cap per episode): enough to cross terminations, and for HalfCheetah the limit.
PLAN = {"HalfCheetah-v4": (2, 1000), "Hopper-v4": (6, 1000), "Walker2d-v4": (6, 1000),
        "Ant-v4": (2, 1000), "Humanoid-v4": (6, 1000)}
# What each env's trace must contain: terminated steps, truncated steps (episode ends).
MUST_END = {"HalfCheetah-v4": "truncated", "Hopper-v4": "terminated", "Walker2d-v4": "terminated",
            "Humanoid-v4": "terminated", "Ant-v4": None}


def edge_states(env_id, u):
    """(qpos, qvel) pairs on and beside the healthy ranges' bounds (gymnasium's v4 defaults)."""
    q0, v0 = u.init_qpos.copy(), u.init_qvel.copy()
    eps = 1e-9
    # (qpos index, values) for z and angle; Hopper's state range on qpos[2:] and qvel
    edges = {"Hopper-v4": [(1, [0.7]), (2, [-0.2, 0.2])], "Walker2d-v4": [(1, [0.8, 2.0]), (2, [-1.0, 1.0])],
             "Ant-v4": [(2, [0.2, 1.0])], "Humanoid-v4": [(2, [1.0, 2.0])]}
    out = []
    for i, values in edges[env_id]:
        for b in values:
            for x in (b - eps, b, b + eps):
                q = q0.copy()
                q[i] = x
                out.append((q, v0.copy()))
    if env_id == "Hopper-v4":
        for x in (-100.0, -100.0 + 1e-6, 100.0 - 1e-6, 100.0):
            q, v = q0.copy(), v0.copy()
            q[3] = x
            out.append((q, v0.copy()))
            v[4] = x
            out.append((q0.copy(), v))
    return out


def nums(xs):
    return " ".join(repr(float(x)) for x in np.ravel(xs))


def trace(env_id, episodes, cap, seed):
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    u = env.unwrapped
    data = u.data
    lines = [f"env {env_id}", f"bounds {nums(env.action_space.low)} {nums(env.action_space.high)}"]
    if hasattr(u, "is_healthy"):
        for q, v in edge_states(env_id, u):
            u.set_state(q, v)
            lines.append(f"health {nums(q)} {nums(v)} {int(bool(u.is_healthy))}")
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        lines.append(f"reset {nums(data.qpos)} {nums(data.qvel)} {nums(obs)}")
        for _ in range(cap):
            # A third of the elements fall past the bounds: the native env clips them (EnvSpec's contract;
            # mpirl's Python path clips before gymnasium), gymnasium gets them clipped.
            a = (1.5 * rng.uniform(env.action_space.low, env.action_space.high)).astype(np.float32)
            obs, r, term, trunc, _ = env.step(np.clip(a, env.action_space.low, env.action_space.high))
            lines.append(f"step {nums(a)} {float(r)!r} {int(term)} {int(trunc)} {nums(obs)}")
            if term or trunc:
                break
    env.close()
    return lines


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def policy_trace(env_id, path, episodes, seed):
    """Episodes of a trained policy's sampled actions (its mean + std x N(0, 1), clipped for gymnasium)."""
    import torch
    m = torch.jit.load(path)
    env = gym.make(env_id)
    u, rng = env.unwrapped, np.random.default_rng(seed)
    lines, lengths = [f"env {env_id}"], []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        lines.append(f"reset {nums(u.data.qpos)} {nums(u.data.qvel)} {nums(obs)}")
        for t in range(1000):
            with torch.no_grad():
                dist, _ = m(torch.as_tensor(obs, dtype=torch.float32)[None])
            A = dist.shape[1] // 2
            a = (dist[0, :A].numpy() + np.exp(dist[0, A:].numpy()) * rng.standard_normal(A)).astype(np.float32)
            obs, r, term, trunc, _ = env.step(np.clip(a, env.action_space.low, env.action_space.high))
            lines.append(f"step {nums(a)} {float(r)!r} {int(term)} {int(trunc)} {nums(obs)}")
            if term or trunc:
                break
        lengths.append(t + 1)
    env.close()
    return lines, lengths


def replay(binary, lines):
    return subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True)


def check_resets(binary, env_id, n, seed):
    env = gym.make(env_id)
    u, ref = env.unwrapped, []
    for k in range(n):
        env.reset(seed=seed + k)
        ref.append(np.concatenate([u.data.qpos, u.data.qvel]))
    ref = np.array(ref)
    env.close()
    out = subprocess.run([binary, "--resets", env_id, str(n), str(seed)], capture_output=True, text=True, check=True)
    nat = np.array([[float(x) for x in l.split()] for l in out.stdout.splitlines()])
    assert nat.shape == ref.shape, f"{env_id}: native resets {nat.shape}, gymnasium's {ref.shape}"
    bad = []
    for i in range(ref.shape[1]):
        ms, mn, ss, sn = ref[:, i].mean(), nat[:, i].mean(), ref[:, i].std(), nat[:, i].std()
        se = math.sqrt((ss ** 2 + sn ** 2) / n)
        if ss < 1e-12 or abs(mn - ms) > 4 * se or not 0.93 < sn / ss < 1.07:
            bad.append(f"[{i}] mean {mn:.4g} vs {ms:.4g} (4 se {4 * se:.2g}), std {sn:.4g} vs {ss:.4g}")
    print(f"{env_id}: {n} resets, {ref.shape[1]} state elements (qpos, qvel), {len(bad)} differ")
    return [f"{env_id} reset noise {b}" for b in bad]


def must_fail(binary, lines, at, change, expect):
    """The trace with line `at` changed by `change` must fail, naming `expect`."""
    bent = list(lines)
    bent[at] = change(bent[at].split())
    res = replay(binary, bent)
    if res.returncode == 0 or expect not in res.stderr:
        return [f"a trace with {expect} changed went unnoticed (rc {res.returncode}: {res.stderr.strip()})"]
    return []


def negative_checks(binary, env_id, lines, action_dim):
    steps = [i for i, l in enumerate(lines) if l.startswith("step ")]
    resets = [i for i, l in enumerate(lines) if l.startswith("reset ")]
    ends = [i for i in steps if lines[i].split()[action_dim + 2] == "1"]

    def action(f):
        f[1] = repr(float(np.float32(float(f[1]) * 0.5 + 0.05)))
        return " ".join(f)

    def last_obs(f):  # the observation's last element of a reset line, off by 1e-4 relative
        f[-1] = repr(float(f[-1]) * (1 + 1e-4) + 1e-4)
        return " ".join(f)

    def flag(f):
        f[action_dim + 2] = "0" if f[action_dim + 2] == "1" else "1"
        return " ".join(f)

    out = must_fail(binary, lines, steps[2], action, "reward")
    out += must_fail(binary, lines, resets[0], last_obs, "reset: observation[")
    if ends:
        out += must_fail(binary, lines, ends[0], flag, "terminated")
    return [f"{env_id}: {o}" for o in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True)
    ap.add_argument("--envs", default=",".join(PLAN))
    ap.add_argument("--resets", type=int, default=4000)
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
        kinds = [l.split()[0] for l in lines]
        adim = len(lines[1].split()[1:]) // 2
        ended = {"terminated": sum(1 for l in lines if l.startswith("step ") and l.split()[adim + 2] == "1"),
                 "truncated": sum(1 for l in lines if l.startswith("step ") and l.split()[adim + 3] == "1")}
        if MUST_END[env_id] and not ended[MUST_END[env_id]]:
            failures.append(f"{env_id}: the trace has no {MUST_END[env_id]} step to compare (seed {args.seed})")
        if env_id != "HalfCheetah-v4" and "health" not in kinds:
            failures.append(f"{env_id}: no health checks in the trace")
        failures += negative_checks(args.replay, env_id, lines, adim)
        policy = os.path.join(FIXTURES, env_id.lower() + "_policy.ts")
        if os.path.exists(policy):
            plines, lengths = policy_trace(env_id, policy, 2, args.seed + 100 * k)
            res = replay(args.replay, plines)
            sys.stdout.write(f"{env_id} trained policy, episode lengths {lengths}: " + res.stdout)
            if res.returncode != 0:
                failures.append(f"{env_id} trained policy: {res.stderr.strip()}")
            if max(lengths) < 300:
                failures.append(f"{env_id} trained policy: episodes of {lengths} steps, not the long ones it is for")
        failures += check_resets(args.replay, env_id, args.resets, args.seed + 100 * k)
    for f in failures:
        print("FAIL", f)
    print("mujoco_parity:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
