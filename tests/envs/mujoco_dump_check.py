#!/usr/bin/env python3
"""What the learner is given, checked against gymnasium's MuJoCo physics, transition by transition.

envs.mujoco_parity checks the native envs (envs/mujoco_locomotion.h) one step at a time in a test
binary. This checks the rest of the way to the learner: the vector env's auto-reset, step counts
and bookkeeping, the actor's rollouts and bootstrap records, the wire and the replay. A short
training run writes its replay to HDF5 (docs/replay.md); its sequences are put back in order per
env (actor, env_index, insert_seq) and gymnasium's env replays each env's whole stream, taking the
stored actions (clipped into the bounds, as a native env does):

- sequences join: a sequence's last observation and is_init are the next one's first, bit for bit
  (a dropped, repeated or reordered rollout breaks the chain);
- a step that did not end an episode: the stored reward and next observation are gymnasium's, and
  is_init is 0;
- a terminated step: gymnasium's step terminates too; the next observation starts an episode;
- a truncated step: it is the episode's 1,000th (gymnasium's time limit; no episode is longer),
  its bootstrap record (boot_obs, boot_step) holds gymnasium's next observation, and the next
  observation starts an episode; no bootstrap record sits at a step that was not truncated;
- a first observation: inside the env's reset noise around the initial state, and no two alike.

The observations leave out the x (and y) position, which the dynamics do not depend on, so an
episode's first state is (0, observation...). Later steps go on from gymnasium's own state with
the observed coordinates set from the stored observation, so that contacts cannot amplify float
rounding along an episode; what the observation leaves out stays gymnasium's: the x position, the
velocities Hopper and Walker2d clip to +-10, the solver's warm start, and the body positions that
Ant's and Humanoid's rewards read (MuJoCo computed them at the start of the last substep, so they
depend on the step before). Only a stream that starts inside an episode (its first sequences were
evicted) starts cold, from its first observation, and that first step is not compared.

Numbers are compared with a tolerance of 1e-4 of max(1, |x|); the median error is about 1e-7. A
contact can amplify the float32 rounding of a stored state past it (0-0.2% of steps do, most in
Humanoid's contact forces), so at most 1% of each kind may exceed it: steps, first steps of an
episode, terminated flags, bootstrap observations (at least one of each kind, and no bootstrap
observation past 1e-2). A misplaced row, action or reward makes nearly every step differ;
--controls checks that tampered copies are refused, each for its own reason. With --gym the run
steps gymnasium's env through the Python bridge (env id gym:<id>) instead: the same check of the
other path.

Usage: mujoco_dump_check.py --mpirl BUILD/mpirl --config configs/mujoco.toml [--envs Hopper-v4,...]
       [--steps 20000] [--gym] [--controls] [--min-truncated N] [--mpirun mpirun] [--keep DIR]
   or: mujoco_dump_check.py --dump runs/NAME/replay.h5 [--controls] (its env_id says which env)
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
TIME_LIMIT = 1000
TOL = 1e-4
MAX_MISMATCH = 0.01  # of each kind; see the docstring
BOOT_BOUND = 1e-2
FIELDS = ("obs", "action", "reward", "terminated", "truncated", "is_init", "actor", "env_index",
          "insert_seq", "boot_obs", "boot_step")


def err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


class Checker:
    KINDS = ("step", "episode start", "terminated flag", "bootstrap observation")

    def __init__(self, env_id):
        self.env_id = env_id
        self.env = gym.make(env_id).unwrapped
        self.env.reset(seed=0)
        self.skip, self.clipv = LAYOUT[env_id]
        self.nq, self.nv = self.env.model.nq, self.env.model.nv
        self.low, self.high = self.env.action_space.low, self.env.action_space.high
        self.n = {"terminated": 0, "truncated": 0, "resets": 0, "streams": 0, "cold": 0}
        self.worst = {"obs": 0.0, "reward": 0.0, "boot_obs": 0.0}
        self.checked = {k: 0 for k in self.KINDS}
        self.over = {k: 0 for k in self.KINDS}  # how many of each kind exceeded TOL
        self.errors = []  # every compared step's largest error (their number: the steps compared)
        self.firsts = set()  # first observations, as bytes
        self.failures = []  # what the plumbing got wrong: joins, flags, resets, bootstrap records
        self.mismatches = []  # the first comparisons over TOL

    def state(self, obs):
        npos = self.nq - self.skip
        qpos = np.concatenate([np.zeros(self.skip), obs[:npos]]).astype(np.float64)
        qvel = np.asarray(obs[npos:npos + self.nv], np.float64)
        return qpos, qvel

    def fail(self, where, what):
        self.failures.append(f"{self.env_id}, {where}: {what}")

    def compare(self, kind, where, what, e):
        self.checked[kind] += 1
        if e > TOL:
            self.over[kind] += 1
            if len(self.mismatches) < 5:
                self.mismatches.append(f"{self.env_id}, {where}: {what}")

    def check_reset(self, obs, where):
        """A first observation: inside the reset noise around the initial state, and new."""
        self.n["resets"] += 1
        key = obs.tobytes()
        if key in self.firsts:
            self.fail(where, "the same first observation as an earlier episode")
        self.firsts.add(key)
        qpos, qvel = self.state(obs)
        u = self.env
        scale = u._reset_noise_scale
        # qpos: uniform +-scale; qvel: uniform +-scale, or normal with sd scale (HalfCheetah, Ant),
        # where 6 sd is far outside any draw of a few thousand.
        wide = 6 * scale if self.env_id in ("HalfCheetah-v4", "Ant-v4") else scale
        dq = np.abs(qpos[self.skip:] - u.init_qpos[self.skip:])
        dv = np.abs(qvel - u.init_qvel)
        if dq.max() > scale * (1 + 1e-5) + 1e-6 or dv.max() > wide * (1 + 1e-5) + 1e-6:
            self.fail(where, f"a first observation outside the reset noise (|dqpos| {dq.max():.3g}, "
                             f"|dqvel| {dv.max():.3g}, scale {scale})")

    def resync(self, obs):
        """Sets the observed coordinates from the stored observation, without mj_forward.

        What the observation leaves out stays gymnasium's own: the x (and y) position, velocities
        clipped to +-10, the solver's warm start, and the body positions of the last substep that
        Ant's and Humanoid's rewards read before the step, as in an uninterrupted episode.
        """
        d = self.env.data
        qpos, qvel = self.state(obs)
        d.qpos[self.skip:] = qpos[self.skip:]
        keep = np.abs(qvel) >= 10.0 - 1e-6 if self.clipv else np.zeros(self.nv, bool)
        d.qvel[~keep] = qvel[~keep]

    def check_stream(self, it, rows):
        """One env's sequences, in the order they were inserted."""
        self.n["streams"] += 1
        T = it["action"].shape[1]
        warm, length = False, None  # gymnasium's env follows this stream; steps into the episode
        for j, i in enumerate(rows):
            who = f"item {i} (actor {it['actor'][i]}, env {it['env_index'][i]})"
            if j == 0 and it["evicted"] == 0 and not it["is_init"][i][0]:
                self.fail(who, "the env's first sequence does not start an episode, and nothing was evicted")
            if j > 0:
                p = rows[j - 1]
                if not (np.array_equal(it["obs"][p][T], it["obs"][i][0]) and
                        it["is_init"][p][T] == it["is_init"][i][0]):
                    self.fail(who, f"does not start where the env's previous sequence (item {p}) ended")
                    warm, length = False, None
            warm, length = self.check_item(it, i, who, warm, length)

    def check_item(self, it, i, who, warm, length):
        obs, act = it["obs"][i], it["action"][i]
        rew, term, trunc, init = it["reward"][i], it["terminated"][i], it["truncated"][i], it["is_init"][i]
        T = act.shape[0]
        boots = {}
        if "boot_step" in it:
            boots = {int(s): k for k, s in enumerate(it["boot_step"][i]) if s >= 0}
        for s in boots:
            if not (0 <= s < T and trunc[s]):
                self.fail(f"{who} step {s}", "a bootstrap record at a step that was not truncated")
        for t in range(T):
            where = f"{who} step {t}"
            ended = bool(term[t] or trunc[t])
            if bool(init[t + 1]) != ended:
                self.fail(where, f"is_init at the next step is {int(init[t + 1])}, the step "
                                 f"{'ended' if ended else 'did not end'} an episode")
            start = bool(init[t])
            if start:  # an episode starts: the solver's warm start is 0, as after mj_resetData
                self.check_reset(obs[t], where)
                self.env.data.qacc_warmstart[:] = 0
                self.env.set_state(*self.state(obs[t]))
                length = 0
            elif warm:
                self.resync(obs[t])
            else:  # a stream that starts inside an episode: its first step only starts the replay
                self.env.set_state(*self.state(obs[t]))
            o2, r2, term2, _, _ = self.env.step(np.clip(act[t], self.low, self.high))
            if length is not None:
                length += 1
                if trunc[t] != (length == TIME_LIMIT):
                    self.fail(where, f"truncated {int(trunc[t])} at the episode's step {length} "
                                     f"(the time limit is {TIME_LIMIT})")
                if length > TIME_LIMIT:
                    self.fail(where, f"an episode longer than the time limit ({length} steps)")
            if term[t] and trunc[t] and not (length == TIME_LIMIT and term2):
                self.fail(where, "both terminated and truncated, not a termination at the time limit")
            if not warm and not start:
                self.n["cold"] += 1
                warm = not ended
                continue
            warm = not ended
            kind = "episode start" if start else "step"
            e = abs(float(rew[t]) - r2) / max(1.0, abs(r2))
            self.worst["reward"] = max(self.worst["reward"], e)
            what = f"reward {rew[t]:.6g}, gymnasium's {r2:.6g}"
            if not ended:
                e_o = err(obs[t + 1], o2)
                self.worst["obs"] = max(self.worst["obs"], e_o)
                e = max(e, e_o)
                what += f"; next observation off by {e_o:.2g} at element {int(np.argmax(np.abs(obs[t + 1] - o2)))}"
            self.compare(kind, where, what, e)
            self.errors.append(e)
            if ended:
                self.compare("terminated flag", where, f"terminated {int(term[t])}, gymnasium's {int(term2)}",
                             float(bool(term[t]) != bool(term2)))
            if term[t]:
                self.n["terminated"] += 1
            elif trunc[t]:
                self.n["truncated"] += 1
                if t not in boots:
                    self.fail(where, "truncated, but no bootstrap record at this step")
                else:
                    e = err(it["boot_obs"][i][boots[t]], o2)
                    self.worst["boot_obs"] = max(self.worst["boot_obs"], e)
                    self.compare("bootstrap observation", where, "bootstrap observation", e)
                    if e > BOOT_BOUND:
                        self.fail(where, f"the bootstrap observation differs from gymnasium's by {e:.3g}")
        return warm, length

    def verdict(self):
        for kind in self.KINDS:
            n, over = self.checked[kind], self.over[kind]
            if over > max(1, MAX_MISMATCH * n):
                self.fail(kind + "s", f"{over} of {n} differ from gymnasium's by more than {TOL:g} "
                                      f"(at most {MAX_MISMATCH:.0%} may, and at least one)")


REQUIRED = FIELDS[:-2]  # boot_obs and boot_step exist only where rollouts keep bootstrap slots


def read_dump(path):
    """The dump's env id and datasets; a file that is not a replay dump ends the check, named."""
    try:
        with h5py.File(path, "r") as f:
            if "env_id" not in f.attrs or "items" not in f:
                sys.exit(f"{path}: not a replay dump (no env_id attribute or /items group; docs/replay.md)")
            env_id = f.attrs["env_id"]
            env_id = env_id.decode() if isinstance(env_id, bytes) else str(env_id)
            items = f["items"]
            missing = [k for k in REQUIRED if k not in items]
            if missing:
                sys.exit(f"{path}: /items has no {', '.join(missing)} (docs/replay.md lists a dump's datasets)")
            it = {k: items[k][...] for k in FIELDS if k in items}
            it["evicted"] = int(f.attrs.get("evicted", 0))
            return env_id, it
    except OSError as e:
        sys.exit(f"{path}: cannot be read as HDF5 ({e})")


def check(env_id, it):
    base = env_id[4:] if env_id.startswith("gym:") else env_id
    if base not in LAYOUT:
        sys.exit(f"{env_id}: not one of the MuJoCo envs this checks ({', '.join(LAYOUT)})")
    c = Checker(base)
    streams = {}
    for i in np.argsort(it["insert_seq"], kind="stable"):
        streams.setdefault((int(it["actor"][i]), int(it["env_index"][i])), []).append(int(i))
    for key in sorted(streams):
        c.check_stream(it, streams[key])
    c.verdict()
    n = it["obs"].shape[0]
    if n == 0 or len(c.errors) < n * it["action"].shape[1] * 0.9:
        c.fail("the dump", f"too little compared: {len(c.errors)} steps of {n} sequences")
    return c


def controls(full):
    """Tampered copies of a dump (its first three env streams), each with what its refusal must say."""
    keys = sorted({(int(a), int(e)) for a, e in zip(full["actor"], full["env_index"])})[:3]
    rows = np.array([(int(a), int(e)) in keys for a, e in zip(full["actor"], full["env_index"])])
    it = {k: (v[rows] if isinstance(v, np.ndarray) else v) for k, v in full.items()}
    def copy():
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in it.items()}
    out = []
    c = copy()  # each action one step late
    c["action"][:, 1:] = it["action"][:, :-1]
    out.append(("actions one step late", c, "steps: "))
    c = copy()  # each sequence with another one's rewards
    c["reward"] = np.roll(it["reward"], 1, axis=0)
    out.append(("rewards of another sequence", c, "steps: "))
    ends = np.argwhere(it["terminated"] | it["truncated"])
    if len(ends):
        c = copy()
        i, t = ends[0]
        c["terminated"][i, t] = c["truncated"][i, t] = 0
        out.append(("an episode end unflagged", c, "is_init at the next step is 1"))
    truncs = np.argwhere(it["truncated"])
    if len(truncs):
        c = copy()  # a time limit reported as a termination
        i, t = truncs[0]
        c["terminated"][i, t], c["truncated"][i, t] = 1, 0
        out.append(("a time limit as a termination", c, "the time limit is"))
        c = copy()  # the reset observation where the bootstrap observation belongs
        for i, t in truncs:
            k = list(it["boot_step"][i]).index(t)
            c["boot_obs"][i, k] = it["obs"][i, t + 1]
        out.append(("bootstrap observations replaced by the next episode's first", c, "bootstrap observation"))
    # a sequence left out of the middle of one env's stream
    order = np.argsort(it["insert_seq"], kind="stable")
    first = (it["actor"][order[0]], it["env_index"][order[0]])
    same = [int(i) for i in order if (it["actor"][i], it["env_index"][i]) == first]
    if len(same) >= 3:
        keep = np.ones(len(it["obs"]), bool)
        keep[same[1]] = False
        c = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in it.items()}
        out.append(("a sequence left out", c, "does not start where"))
    return out


def run(args, env_id, out):
    name = env_id.replace(":", "_")
    cmd = [args.mpirun, "-n", "3", "--oversubscribe", args.mpirl, "train", "--config", args.config,
           "--set", f'env.id="{env_id}"', "--set", f"run.total_env_steps={args.steps}",
           "--set", f'run.out_dir="{out}"', "--set", f'run.name="{name}"',
           "--set", 'run.checkpoint="never"', "--set", "run.tensorboard=false",
           "--set", 'replay.dump="end"', "--set", 'run.progress="lines"',
           "--set", "run.stop_mean_return=nan", "--set", "run.seed=3",
           # keep what the actors sent: a sampled replay large enough for all of it, not the queue
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
    print(f"{env_id}: {n['streams']} env streams, {len(c.errors)} steps compared ({n['terminated']} terminated, "
          f"{n['truncated']} truncated, {n['resets']} first observations; {n['cold']} cold first steps). "
          f"Error: median {np.median(errors):.2g}, largest "
          + ", ".join(f"{k} {v:.2g}" for k, v in c.worst.items()) + ". Over " + f"{TOL:g}: "
          + ", ".join(f"{c.over[k]} of {c.checked[k]} {k}s" for k in c.KINDS))
    for m in c.mismatches:
        print("  differs: " + m)
    for m in c.failures[:20]:
        print("  FAIL " + m)
    if len(c.failures) > 20:
        print(f"  ... and {len(c.failures) - 20} more")
    return not c.failures


def check_and_report(env_id, it, with_controls):
    c = check(env_id, it)
    ok = report(c, env_id)
    if with_controls:
        for what, bad, expect in controls(it):
            msgs = check(env_id, bad).failures
            hit = [m for m in msgs if expect in m]
            print(f"  control ({what}): " + (f"refused: {hit[0]}" if hit else
                                             "NOT refused" + (f" for its reason ({msgs[0]})" if msgs else "")))
            ok = ok and bool(hit)
    return ok, c.n["truncated"]


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
