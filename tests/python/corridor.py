# corridor.py
import gymnasium as gym
import numpy as np

class Corridor(gym.Env):
    def __init__(self, n=8):
        self.n, self.pos, self.t = n, 0, 0
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def obs(self):
        o = np.zeros(self.n, np.float32)
        o[self.pos] = 1.0
        return o

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self.obs(), {}

    def step(self, action):
        self.pos = max(0, min(self.n - 1, self.pos + (1 if action == 1 else -1)))
        self.t += 1
        done = self.pos == self.n - 1
        return self.obs(), float(done), done, self.t >= 50 and not done, {}

def make(num_envs, seed, **kwargs):
    return gym.vector.SyncVectorEnv([lambda: Corridor(**kwargs) for _ in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
