#!/usr/bin/env python3
"""What the learner is given, checked against gymnasium's MuJoCo physics, transition by transition.

envs.mujoco_parity checks the native envs (envs/mujoco_locomotion.h) one step at a time in a test
binary. This checks the rest of the way to the learner: the vector env's auto-reset and
bookkeeping, the actor's rollouts and bootstrap records, the wire and the replay. A short training
run writes its replay to HDF5 (docs/replay.md); then, for every stored step of every sequence,
gymnasium's env is put in the state the stored observation describes and takes the stored action
(clipped into the bounds, as a native env does), and the stored reward, flags and next
observation must be what it gives:

- a step that did not end an episode: the next stored observation is gymnasium's, is_init 0;
- a terminated step: gymnasium's step terminates too, and the next observation starts an episode;
- a truncated step: the bootstrap record at that step (boot_obs, boot_step) holds gymnasium's
  next observation, and the next observation starts an episode;
- a step that starts an episode: its state lies inside the env's reset noise around the initial
  state.

The observations leave out the x (and y) position, which the dynamics do not depend on, so an
episode's first state is (0, observation...). Later steps go on from gymnasium's own state with
the observed coordinates set from the stored observation, so that contacts cannot amplify float
rounding over a sequence; what the observation leaves out stays gymnasium's: the x position, the
velocities Hopper and Walker2d clip to +-10, the solver's warm start, and the body positions that
Ant's and Humanoid's rewards read (MuJoCo computed them at the start of the last substep, so they
depend on the step before). A sequence's first step inside an episode only starts that (its warm
start is unknown). The comparison's tolerance is 1e-4 of max(1, |x|) (the median error is about
1e-7), and up to 1% of the steps may exceed it: a contact can amplify the float32 rounding of a
stored state (0-0.15% of steps do, most in Humanoid's contact forces). A misplaced row, action or
reward makes nearly every step differ; --controls checks that tampered copies are refused. With
--gym the run steps gymnasium's env through the Python bridge (env id gym:<id>) instead: the same
check of the other path.

Usage: mujoco_dump_check.py --mpirl BUILD/mpirl --config configs/mujoco.toml [--envs Hopper-v4,...]
       [--steps 20000] [--gym] [--controls] [--min-truncated N] [--mpirun mpirun] [--keep DIR]
   or: mujoco_dump_check.py --dump runs/NAME/replay.h5 (check an existing dump; its env_id says which)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import h5py
import numpy as np

warnings.filterwarnings("ignore")  # gymnasium's deprecation notes for the -v4 envs
import gymnasium as gym  # noqa: E402

# Observation layout: (positions left out at the front of qpos, velocities clipped to +-10).
LAYOUT = {"Hopper-v4": (1, True), "Walker2d-v4": (1, True), "HalfCheetah-v4": (1, False),
          "Ant-v4": (2, False), "Humanoid-v4": (2, False)}
TOL = 1e-4
# A step of a contact-rich env (Ant, Humanoid, HalfCheetah) can amplify the float32 rounding of the
# stored state past TOL: about 0.1-0.3% of their steps do. A misplaced row, action or reward makes
# most steps differ.
MAX_MISMATCH = 0.01


def err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


class Checker:
    def __init__(self, env_id):
        self.env_id = env_id
        self.env = gym.make(env_id).unwrapped
        self.env.reset(seed=0)
        self.skip, self.clipv = LAYOUT[env_id]
        self.nq, self.nv = self.env.model.nq, self.env.model.nv
        self.low, self.high = self.env.action_space.low, self.env.action_space.high
        self.n = {"steps": 0, "ended_terminated": 0, "ended_truncated": 0, "resets": 0,
                  "skipped_clipped_velocity": 0, "skipped_cold_start": 0}
        self.worst = {"obs": 0.0, "reward": 0.0, "boot_obs": 0.0}
        self.errors = []  # each checked step's largest error (reward, next or bootstrap observation)
        self.failures = []  # what the plumbing got wrong: flags, resets, bootstrap records
        self.mismatches = []  # the first steps whose numbers differ by more than TOL

    def state(self, obs):
        npos = self.nq - self.skip
        qpos = np.concatenate([np.zeros(self.skip), obs[:npos]]).astype(np.float64)
        qvel = np.asarray(obs[npos:npos + self.nv], np.float64)
        return qpos, qvel

    def fail(self, where, what):
        if len(self.failures) < 20:
            self.failures.append(f"{self.env_id}, {where}: {what}")
        else:
            self.failures.append(None)

    def check_reset(self, obs, where):
        """A first observation: inside the reset noise around the initial state."""
        self.n["resets"] += 1
        qpos, qvel = self.state(obs)
        u = self.env
        scale = u._reset_noise_scale
        # qpos: uniform +-scale everywhere; qvel: uniform +-scale, or normal with sd scale (HalfCheetah,
        # Ant): 6 sd is far outside any draw of a few thousand.
        wide = 6 * scale if self.env_id in ("HalfCheetah-v4", "Ant-v4") else scale
        dq = np.abs(qpos[self.skip:] - u.init_qpos[self.skip:])
        dv = np.abs(qvel - u.init_qvel)
        if dq.max() > scale * (1 + 1e-5) + 1e-6 or dv.max() > wide * (1 + 1e-5) + 1e-6:
            self.fail(where, f"a first observation outside the reset noise (|dqpos| {dq.max():.3g}, "
                             f"|dqvel| {dv.max():.3g}, scale {scale})")

    def mismatch(self, where, what):
        if len(self.mismatches) < 5:
            self.mismatches.append(f"{self.env_id}, {where}: {what}")

    def resync(self, obs):
        """Puts gymnasium's env in the stored state without losing what the observation leaves out.

        The observed coordinates are set from the stored observation (float32) where gymnasium's
        own step has them only to float rounding, so that chaos cannot amplify that rounding over
        a sequence; the x (and y) position, the velocities clipped to +-10, the solver's warm start
        and the body positions MuJoCo computed at the start of the last substep stay gymnasium's.
        No mj_forward: Ant's and Humanoid's rewards read those body positions (get_body_com, xipos)
        before the step, as in an uninterrupted episode.
        """
        d = self.env.data
        qpos, qvel = self.state(obs)
        d.qpos[self.skip:] = qpos[self.skip:]
        keep = np.abs(qvel) >= 10.0 - 1e-6 if self.clipv else np.zeros(self.nv, bool)
        d.qvel[~keep] = qvel[~keep]

    def check_item(self, it, i, boot_obs, boot_step):
        obs, act = it["obs"][i], it["action"][i]
        rew, term, trunc, init = it["reward"][i], it["terminated"][i], it["truncated"][i], it["is_init"][i]
        T = act.shape[0]
        who = f"item {i} (actor {it['actor'][i]}, env {it['env_index'][i]})"
        boots = {int(s): k for k, s in enumerate(boot_step[i]) if s >= 0} if boot_step is not None else {}
        for s in boots:
            if not (0 <= s < T and trunc[s]):
                self.fail(f"{who} step {s}", "a bootstrap record at a step that was not truncated")
        if init[0]:
            self.check_reset(obs[0], who + " step 0")
        warm = False
        for t in range(T):
            where = f"{who} step {t}"
            if term[t] and trunc[t]:
                self.fail(where, "both terminated and truncated")
            ended = bool(term[t] or trunc[t])
            if bool(init[t + 1]) != ended:
                self.fail(where, f"is_init at the next step is {int(init[t + 1])}, the step "
                                 f"{'ended' if ended else 'did not end'} an episode")
            if ended:
                self.check_reset(obs[t + 1], f"{who} step {t + 1}")
            if init[t]:  # an episode starts: the solver's warm start is 0, as after mj_resetData
                self.env.data.qacc_warmstart[:] = 0
                self.env.set_state(*self.state(obs[t]))
                warm = True
            elif not warm:  # a sequence that starts inside an episode
                qpos, qvel = self.state(obs[t])
                if self.clipv and np.max(np.abs(qvel)) >= 10.0 - 1e-6:
                    self.n["skipped_clipped_velocity"] += 1
                    continue
                self.env.set_state(qpos, qvel)
            else:
                self.resync(obs[t])
            o2, r2, term2, _, _ = self.env.step(np.clip(act[t], self.low, self.high))
            if not warm:  # a sequence that starts inside an episode: its solver warm start is unknown
                self.n["skipped_cold_start"] += 1
                warm = not (term[t] or trunc[t])
                continue
            warm = not (term[t] or trunc[t])
            self.n["steps"] += 1
            worst, bad = abs(float(rew[t]) - r2) / max(1.0, abs(r2)), []
            self.worst["reward"] = max(self.worst["reward"], worst)
            if worst > TOL:
                bad.append(f"reward {rew[t]:.6g}, gymnasium's {r2:.6g}")
            if bool(term[t]) != bool(term2):
                bad.append(f"terminated {int(term[t])}, gymnasium's {int(term2)}")
                worst = max(worst, 1.0)
            if term[t]:
                self.n["ended_terminated"] += 1
            elif trunc[t]:
                self.n["ended_truncated"] += 1
                if t not in boots:
                    self.fail(where, "truncated, but no bootstrap record at this step")
                else:
                    e = err(boot_obs[i][boots[t]], o2)
                    self.worst["boot_obs"] = max(self.worst["boot_obs"], e)
                    worst = max(worst, e)
                    if e > TOL:
                        bad.append(f"the bootstrap observation differs from gymnasium's by {e:.3g}")
            else:
                e = err(obs[t + 1], o2)
                self.worst["obs"] = max(self.worst["obs"], e)
                worst = max(worst, e)
                if e > TOL:
                    bad.append(f"the next observation differs from gymnasium's by {e:.3g} "
                               f"(element {int(np.argmax(np.abs(obs[t + 1] - o2)))})")
            self.errors.append(worst)
            if bad:
                self.mismatch(where, "; ".join(bad))

    def verdict(self):
        """Fails on any plumbing failure, or where more than MAX_MISMATCH of the steps differ."""
        n = len(self.errors)
        frac = float(np.mean(np.asarray(self.errors) > TOL)) if n else 1.0
        if n and frac > MAX_MISMATCH:
            self.failures.append(f"{self.env_id}: {frac:.1%} of {n} steps differ from gymnasium's by more "
                                 f"than {TOL:g} (at most {MAX_MISMATCH:.0%} may: contacts amplify the "
                                 f"float32 rounding of a stored state)")
        return frac


FIELDS = ("obs", "action", "reward", "terminated", "truncated", "is_init", "actor", "env_index",
          "boot_obs", "boot_step")


def read_dump(path):
    with h5py.File(path, "r") as f:
        env_id = f.attrs["env_id"]
        env_id = env_id.decode() if isinstance(env_id, bytes) else str(env_id)
        items = f["items"]
        return env_id, {k: items[k][...] for k in FIELDS if k in items}


def check(env_id, it):
    base = env_id[4:] if env_id.startswith("gym:") else env_id
    if base not in LAYOUT:
        sys.exit(f"{env_id}: not one of the MuJoCo envs this checks ({', '.join(LAYOUT)})")
    c = Checker(base)
    for i in range(it["obs"].shape[0]):
        c.check_item(it, i, it.get("boot_obs"), it.get("boot_step"))
    c.verdict()
    if it["obs"].shape[0] == 0 or c.n["steps"] < it["obs"].shape[0] * 32:
        c.fail("the dump", f"too little to check: {it['obs'].shape[0]} sequences, {c.n['steps']} steps")
    return c


def controls(env_id, it):
    """Copies of a dump that a sound check must refuse, each for its own reason."""
    def copy():
        return {k: v.copy() for k, v in it.items()}
    out = []
    shifted = copy()  # each action one step late
    shifted["action"][:, 1:] = it["action"][:, :-1]
    out.append(("actions one step late", shifted, "of "))
    swapped = copy()  # each sequence with the next one's rewards
    swapped["reward"] = np.roll(it["reward"], 1, axis=0)
    out.append(("rewards of another sequence", swapped, "of "))
    flag = copy()  # the first episode end, unflagged
    ends = np.argwhere(it["terminated"] | it["truncated"])
    if len(ends):
        i, t = ends[0]
        flag["terminated"][i, t] = flag["truncated"][i, t] = 0
        out.append(("an episode end unflagged", flag, "is_init at the next step is 1"))
    return out


def run(args, env_id, out):
    mpirun = [args.mpirun, "-n", "3", "--oversubscribe"]
    name = env_id.replace(":", "_")
    cmd = mpirun + [args.mpirl, "train", "--config", args.config,
                    "--set", f'env.id="{env_id}"', "--set", f"run.total_env_steps={args.steps}",
                    "--set", f'run.out_dir="{out}"', "--set", f'run.name="{name}"',
                    "--set", 'run.checkpoint="never"', "--set", "run.tensorboard=false",
                    "--set", 'replay.dump="end"', "--set", 'run.progress="lines"',
                    "--set", "run.stop_mean_return=nan", "--set", "run.seed=3",
                    # keep what the actors sent: a sampled replay instead of the config's queue
                    "--set", "actor.synchronous=false", "--set", 'replay.selector="uniform"',
                    "--set", "replay.capacity=1024", "--set", "replay.max_times_sampled=0"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"{env_id}: the run failed ({p.returncode}):\n{p.stdout[-3000:]}\ncommand: {' '.join(cmd)}")
    return os.path.join(out, name, "replay.h5")


def report(c, env_id):
    n = c.n
    errors = np.asarray(c.errors) if c.errors else np.zeros(1)
    print(f"{env_id}: {n['steps']} steps checked ({n['ended_terminated']} terminated, {n['ended_truncated']} "
          f"truncated), {n['resets']} first observations; skipped {n['skipped_clipped_velocity']} (clipped "
          f"velocity) and {n['skipped_cold_start']} (a sequence's first step inside an episode). Error: "
          f"median {np.median(errors):.2g}, largest " + ", ".join(f"{k} {v:.2g}" for k, v in c.worst.items())
          + f"; {np.mean(errors > TOL):.2%} of steps over {TOL:g}")
    for m in c.mismatches:
        print("  differs: " + m)
    bad = [m for m in c.failures if m is not None]
    for m in bad:
        print("  FAIL " + m)
    if len(c.failures) > len(bad):
        print(f"  ... and {len(c.failures) - len(bad)} more")
    return not c.failures


def check_and_report(env_id, it, with_controls):
    c = check(env_id, it)
    ok = report(c, env_id)
    if with_controls:
        for what, bad, expect in controls(env_id, it):
            cc = check(env_id, bad)
            msgs = [m for m in cc.failures if m is not None]
            caught = any(expect in m for m in msgs)
            print(f"  control ({what}): " + (f"refused: {msgs[0]}" if caught else "NOT refused"))
            ok = ok and caught
    return ok, c.n["ended_truncated"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpirl")
    ap.add_argument("--config", default="configs/mujoco.toml")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--envs", default="Hopper-v4,HalfCheetah-v4")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--gym", action="store_true", help="run gym:<id> (gymnasium through the Python bridge)")
    ap.add_argument("--keep", help="write the runs here and keep them")
    ap.add_argument("--dump", help="check this dump instead of running")
    ap.add_argument("--controls", action="store_true",
                    help="also check tampered copies of each dump, which must be refused")
    ap.add_argument("--min-truncated", type=int, default=0,
                    help="fail unless the dumps hold at least this many truncated steps in all")
    args = ap.parse_args()
    ok, truncated = True, 0
    if args.dump:
        env_id, it = read_dump(args.dump)
        ok, truncated = check_and_report(env_id, it, args.controls)
    else:
        if not args.mpirl:
            ap.error("--mpirl or --dump is required")
        out = args.keep or tempfile.mkdtemp(prefix="mujoco_dump_check.")
        try:
            for base in args.envs.split(","):
                env_id, it = read_dump(run(args, ("gym:" + base) if args.gym else base, out))
                good, n = check_and_report(env_id, it, args.controls)
                ok, truncated = ok and good, truncated + n
        finally:
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    if truncated < args.min_truncated:
        print(f"FAIL: {truncated} truncated steps in all, fewer than {args.min_truncated}")
        ok = False
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
