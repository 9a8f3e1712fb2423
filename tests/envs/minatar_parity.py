#!/usr/bin/env python3
"""The native MinAtar games (envs/minatar.h, ids <Game>-MinAtar) against the minatar package.

For each game: the package plays uniform random actions with sticky actions 0.1 (its defaults),
while a proxy of its numpy RandomState records every draw it makes; minatar_replay feeds those
draws to the C++ game in the same order and checks each reset and step: the same observation,
reward and terminal flag, every draw used, none missing. Then the random policy's return
distribution: the package's episodes against the port's own (mpirl's generator, other episodes),
whose means must agree within 2 combined standard errors (the port plays 4x the episodes).

Usage: minatar_parity.py --replay BUILD/minatar_replay [--games a,b] [--episodes-scale 1.0]
"""
import argparse
import math
import subprocess
import sys
import tempfile

import numpy as np
from minatar import Environment

# Episodes per game: Freeway's last 2,501 steps each; the other games' random episodes are short.
EPISODES = {"asterix": 400, "breakout": 600, "freeway": 24, "seaquest": 400, "space_invaders": 800}
NATIVE_FACTOR = 4  # the port plays 4x as many episodes (cheap), which narrows the comparison


class RecordingRandom:
    """numpy.random.RandomState's rand()/randint() as the games call them, with each value logged."""

    def __init__(self, seed, log):
        self.rs, self.log = np.random.RandomState(seed), log

    def rand(self, *size):
        v = self.rs.rand(*size)
        for x in np.atleast_1d(v):
            self.log.append(f"d r {float(x)!r}")
        return v

    def randint(self, low, high=None, size=None):
        v = self.rs.randint(low, high, size)
        lo, hi = (0, low) if high is None else (low, high)
        for x in np.atleast_1d(v):
            self.log.append(f"d i {lo} {hi} {int(x)}")
        return v


def obs_string(env):
    return "".join("1" if b else "0" for b in np.moveaxis(env.state(), -1, 0).ravel())


def package_trace(game, episodes, seed):
    """The trace lines of `episodes` random episodes, and their returns."""
    env = Environment(game, sticky_action_prob=0.1)
    lines, returns, steps = [f"game {game}"], [], 0
    rec = RecordingRandom(seed, lines)
    env.random = env.env.random = rec
    actions = env.minimal_action_set()
    pick = np.random.default_rng(seed + 7)
    for _ in range(episodes):
        env.reset()
        lines.append("reset " + obs_string(env))
        ret, done = 0.0, False
        while not done:
            a = int(pick.integers(len(actions)))
            r, done = env.act(actions[a])
            ret += r
            steps += 1
            lines.append(f"step {a} {int(r)} {int(bool(done))} {obs_string(env)}")
        returns.append(ret)
    return lines, np.asarray(returns), steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", required=True)
    ap.add_argument("--games", default=",".join(EPISODES))
    ap.add_argument("--episodes-scale", type=float, default=1.0)
    args = ap.parse_args()
    failed = []
    for game in args.games.split(","):
        n = max(2, int(EPISODES[game] * args.episodes_scale))
        lines, pkg, steps = package_trace(game, n, seed=11)
        with tempfile.TemporaryFile("w+") as f:
            f.write("\n".join(lines) + "\n")
            f.seek(0)
            p = subprocess.run([args.replay], stdin=f, capture_output=True, text=True)
        print((p.stdout + p.stderr).strip())
        if p.returncode != 0:
            failed.append(f"{game}: the step-by-step replay differs")
            continue
        q = subprocess.run([args.replay, "--random", game, str(NATIVE_FACTOR * n), "5"], capture_output=True, text=True, check=True)
        nat = np.asarray([float(x) for x in q.stdout.split()])
        se = math.sqrt(pkg.var(ddof=1) / len(pkg) + nat.var(ddof=1) / len(nat))
        diff = abs(pkg.mean() - nat.mean())
        ok = diff <= 2 * se
        print(f"{game}: random policy, {n} package episodes ({steps} steps), {len(nat)} port episodes: package {pkg.mean():.3f} +- "
              f"{pkg.std(ddof=1):.3f}, port {nat.mean():.3f} +- {nat.std(ddof=1):.3f}; |difference| {diff:.3f} "
              f"{'<=' if ok else '>'} 2 standard errors ({2 * se:.3f})")
        if not ok:
            failed.append(f"{game}: random-policy mean returns differ by more than 2 standard errors")
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed))
        sys.exit(1)
    print("minatar parity: every game replays the package exactly and matches its random-policy returns")


if __name__ == "__main__":
    main()
