"""Python envs for mpirl's tests, used as env.id = "py:mpirl_test_envs:<factory>" (this folder on
PYTHONPATH, or sys.path).

`scripted`: env `index` ends its episode k after 2 + (index + k) % 4 steps, by termination when k
is even and by truncation when k is odd. The observation is [index, k, step in the episode, 1] and
the reward is the step in the episode (1, 2, ...), so a fake auto-reset step (reward 0, step 0
without is_init) would show in a rollout."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Scripted(gym.Env):
    def __init__(self, index, nan_at=None, raise_at=None, obs_space="box"):
        self.index, self.k, self.t, self.total = index, -1, 0, 0
        self.nan_at, self.raise_at = nan_at, raise_at
        box = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.observation_space = spaces.Dict({"x": box}) if obs_space == "dict" else box
        self.action_space = spaces.Discrete(2)

    def length(self):
        return 2 + (self.index + self.k) % 4

    def obs(self):
        return np.array([self.index, self.k, self.t, 1.0], dtype=np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.k, self.t = self.k + 1, 0
        return self.obs(), {}

    def step(self, action):
        self.t += 1
        self.total += 1
        if self.raise_at is not None and self.total >= self.raise_at:
            raise RuntimeError(f"scripted failure in env {self.index} at its step {self.total}")
        reward = float(self.t)
        if self.nan_at is not None and self.total >= self.nan_at:
            reward = float("nan")
        end = self.t >= self.length()
        return self.obs(), reward, end and self.k % 2 == 0, end and self.k % 2 == 1, {}


class WrongShape(gym.vector.VectorWrapper):
    """From vector step `at` on, observations get one column too many."""

    def __init__(self, venv, at):
        super().__init__(venv)
        self.n, self.at = 0, at

    def step(self, actions):
        o, r, te, tr, info = self.env.step(actions)
        self.n += 1
        return (np.concatenate([o, o[:, :1]], axis=1) if self.n >= self.at else o), r, te, tr, info


def scripted(num_envs, seed, autoreset_mode="SameStep", bad_env=-1, nan_at=None, raise_at=None, obs_space="box",
             wrong_shape_at=None):
    """nan_at / raise_at (counted in env steps) apply to env index `bad_env` (-1: the last)."""
    bad = bad_env % num_envs

    def env(i):
        return lambda: Scripted(i, nan_at if i == bad else None, raise_at if i == bad else None, obs_space)

    venv = gym.vector.SyncVectorEnv([env(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode(autoreset_mode))
    venv.max_episode_steps = 2  # the shortest episode: truncations of one env are at least this far apart
    return venv if wrong_shape_at is None else WrongShape(venv, wrong_shape_at)


def cartpole(num_envs, seed, **kwargs):
    """docs/environments.md's example: any Gymnasium vector env with a SAME_STEP autoreset."""
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}, **kwargs)


def pixel_image(index, counter, salt=0, shape=(3, 12, 12)):
    """The image env `index` returns as its `counter`-th observation: bytes 0-3 hold the counter
    (uint32, little-endian), byte 4 the env index, byte 5 a per-process salt (from the seed, so
    actors differ), the rest every value 0..255 from a generator seeded with (index, counter,
    salt). Tests recompute it from the dumped bytes."""
    img = np.random.default_rng([index, counter, salt]).integers(0, 256, size=shape, dtype=np.uint8)
    flat = img.reshape(-1)
    flat[:4] = np.frombuffer(np.uint32(counter).tobytes(), np.uint8)
    flat[4] = index
    flat[5] = salt
    return img


def image_counter(img):
    return int(np.frombuffer(np.ascontiguousarray(img).reshape(-1)[:4].tobytes(), np.uint32)[0])


class Pixels(Scripted):
    """Scripted's episode ends (terminated and truncated alternately) with uint8 [3, 12, 12]
    images; every observation it returns (reset, step, final) advances its counter by one."""

    def __init__(self, index, salt, shape):
        super().__init__(index)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.counter, self.salt, self.shape = -1, salt, shape

    def obs(self):
        self.counter += 1
        return pixel_image(self.index, self.counter, self.salt, self.shape)


def pixels(num_envs, seed, shape=(3, 12, 12)):
    """shape: e.g. [12, 12, 3] for a channels-last space (refused at start)."""
    salt, shape = int(seed) % 251, tuple(shape)
    venv = gym.vector.SyncVectorEnv([lambda i=i: Pixels(i, salt, shape) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    venv.max_episode_steps = 2
    return venv


class Endless(gym.Env):
    """A user's first env: it never terminates, and truncates its own episodes after
    `truncate_at` steps (None: never) without declaring a time limit anywhere."""

    def __init__(self, truncate_at=None):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.truncate_at, self.t = truncate_at, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, 1.0], np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([min(self.t / 100.0, 1.0), 1.0], np.float32)
        return obs, float(action == 1), False, self.truncate_at is not None and self.t >= self.truncate_at, {}


def endless(num_envs, seed, truncate_at=40, declare="none"):
    """declare: "none" (the env truncates by itself, no limit declared), "timelimit" (a
    gymnasium TimeLimit wrapper around each sub-env) or "attr" (a max_episode_steps attribute on
    each sub-env)."""
    def make():
        if declare == "timelimit":
            return gym.wrappers.TimeLimit(Endless(None), max_episode_steps=truncate_at)
        env = Endless(truncate_at)
        if declare == "attr":
            env.max_episode_steps = truncate_at
        return env

    return gym.vector.SyncVectorEnv([make for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
