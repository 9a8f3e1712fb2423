"""The learning suites of issue 41 for bench/learning.py (`--suite NAME`): one config per suite, the
same for every env in it (only env.id changes), run to a fixed env-step budget without stopping at
the reference, and scored as CleanRL scores: the mean return of the last 100 training episodes at
the budget (summary.json's final_mean_return). The reference score is also the threshold whose
first crossing gives "steps / time to reference".

Task tuple, as bench/learning.py's TASKS: (config under configs/, extra --set, reference score or
None, env-step budget, wall-clock limit in s).
"""
import json
import os


# CleanRL's tables: vwxyzjn/cleanrl docs/benchmark/ppo_continuous_action.md (tag pr-424; 1M steps,
# 3 seeds, gymnasium -v4 ids) and docs/rl-algorithms/ppo.md (ppo.py, 500k steps, 3 seeds).
MUJOCO = {
    # env id: (CleanRL ppo_continuous_action at 1M steps, mean +- std over 3 seeds; None = no figure)
    "HalfCheetah-v4": (1442.64, 46.03),
    "Hopper-v4": (2382.86, 271.74),
    "Walker2d-v4": (2287.95, 571.78),
    "Ant-v4": None,  # no 1M figure in CleanRL's table; Sample Factory's APPO: 5876 at 10M
    "Humanoid-v4": (716.0, None),  # the figure from the same table; its spread not copied
}
CLASSIC = {
    # env id: (reference score, its spread or None, the reference's budget = the run's, its source)
    "CartPole-v1": (490.04, 6.12, 500_000, "CleanRL ppo.py"),
    "gym:Acrobot-v1": (-86.36, 1.32, 500_000, "CleanRL ppo.py"),  # gymnasium's; CartPole and Pendulum are built in
    # gymnax-blines agents/Pendulum-v1/ppo.yaml: num_train_steps 1,000,000; the README's "R: -130" is the
    # return of the trained checkpoint over its test rollouts (num_test_rollouts 164), not of training
    # episodes. CleanRL's only Pendulum figure is at 8M steps: -1141.98 +- 135.55 (ppo_continuous_action).
    "Pendulum-v1": (-130.0, None, 1_000_000, "gymnax PPO checkpoint"),
}

# MinAtar (mpirl's C++ ports, envs/minatar.h) under gymnax's set-up (configs/minatar.toml: no sticky
# actions, episodes cut at gymnax's max_steps_in_episode: 1,000 steps, Freeway 2,500) against gymnax's
# PPO checkpoints at 10M steps (gymnax's README table, as the issue reads it: evaluation returns of one
# trained agent). One difference stays: gymnax's PPO treats the cap as a terminal state, mpirl
# truncates there and bootstraps from the value of the last state. The budget is 5M
# steps, half the reference's: 5 games x 3 seeds at 10M is more than 3 hours of this 2-core
# machine. Seaquest has no gymnax figure; its reference is the MinAtar paper's AC(lambda) at 5M
# (about 15.5 read off its curves), which used the package's settings (sticky actions 0.1, no cap):
# the minatar_paper suite below runs those.
MINATAR = {
    "Asterix-MinAtar": 15.0,
    "Breakout-MinAtar": 28.0,
    "Freeway-MinAtar": 58.0,
    "Seaquest-MinAtar": None,
    "SpaceInvaders-MinAtar": 131.0,
}

SUITES = {}
SUITE_TASKS = {}
SUITE_REFERENCES = {}

for _id, _ref in MUJOCO.items():
    _name = "mujoco_" + _id.split("-")[0].lower()
    SUITE_TASKS[_name] = ("mujoco.toml", [f'env.id="gym:{_id}"'], _ref[0] if _ref else None, 1_000_000, 3600)
    _pm = f" +- {_ref[1]}" if _ref and _ref[1] is not None else ""
    SUITE_REFERENCES[_name] = (f"CleanRL ppo_continuous_action: {_ref[0]}{_pm} at 1M steps (3 seeds)" if _ref
                               else "CleanRL: no 1M figure; Sample Factory APPO: 5876 at 10M")
    SUITES.setdefault("mujoco", []).append(_name)
# The same suite on mpirl's native MuJoCo envs (envs/mujoco_locomotion.h: gymnasium's XML files and
# step in C++, checked step for step against gymnasium's by ctest -R envs.mujoco_parity): the same
# config and references; only the env runs without Python.
for _id, _ref in MUJOCO.items():
    _name = "mujoco_native_" + _id.split("-")[0].lower()
    SUITE_TASKS[_name] = ("mujoco.toml", [f'env.id="{_id}"'], _ref[0] if _ref else None, 1_000_000, 3600)
    SUITE_REFERENCES[_name] = SUITE_REFERENCES["mujoco_" + _id.split("-")[0].lower()]
    SUITES.setdefault("mujoco_native", []).append(_name)
for _id, (_score, _std, _budget, _source) in CLASSIC.items():
    _name = "classic_" + _id.split(":")[-1].split("-")[0].lower()
    SUITE_TASKS[_name] = ("classic.toml", [f'env.id="{_id}"'], _score, _budget, 1800)
    SUITE_REFERENCES[_name] = (f"{_source}: {_score} +- {_std} at {_budget // 1000}k steps (3 seeds)" if _std is not None
                               else f"{_source}: {_score:.0f} at {_budget // 1_000_000}M steps (its test rollouts); "
                                    "CleanRL ppo_continuous_action: -1141.98 +- 135.55 at 8M")
    SUITES.setdefault("classic", []).append(_name)

for _id, _ref in MINATAR.items():
    _name = "minatar_gymnax_" + _id.split("-")[0].lower()  # minatar_<game> are learning.py's CNN tasks
    SUITE_TASKS[_name] = ("minatar.toml", [f'env.id="{_id}"'], _ref, 5_000_000, 1800)
    SUITE_REFERENCES[_name] = (f"gymnax PPO checkpoint: {_ref} at 10M steps (no sticky actions, gymnax's caps, as here)" if _ref
                               else "gymnax: no figure; MinAtar paper AC(lambda) about 15.5 at 5M with sticky actions")
    SUITES.setdefault("minatar", []).append(_name)
# The same suite at the gymnax checkpoints' own budget, 10M steps: at 5M the curves of Asterix,
# Freeway and SpaceInvaders were still rising (seed 1: Asterix 5.45 at 4M, 7.79 at 5M). Runs as far
# as the machine's time allows; the page lists the games not yet run.
for _id, _ref in MINATAR.items():
    _game = _id.split("-")[0].lower()
    _name = "minatar_gymnax10m_" + _game
    SUITE_TASKS[_name] = ("minatar.toml", [f'env.id="{_id}"'], _ref, 10_000_000, 3600)
    SUITE_REFERENCES[_name] = SUITE_REFERENCES["minatar_gymnax_" + _game]  # the 5M suite's reference
    SUITES.setdefault("minatar_10m", []).append(_name)
# The same APPO config with the package's settings (env.kwargs = '{}': sticky actions 0.1,
# difficulty ramping, no cap), the settings of the MinAtar paper and of the R2D2 suite below, against
# the paper's AC(lambda) at 5M frames (its curves: about 19, 17.5, 47, 15.5 and 185). This is
# mpirl's APPO beside R2D2 on equal terms (issue 43) and the one Seaquest reference.
MINATAR_PAPER_AC = {"Asterix-MinAtar": 19.0, "Breakout-MinAtar": 17.5, "Freeway-MinAtar": 47.0,
                    "Seaquest-MinAtar": 15.5, "SpaceInvaders-MinAtar": 185.0}
for _id, _ref in MINATAR_PAPER_AC.items():
    _name = "minatar_paper_" + _id.split("-")[0].lower()
    SUITE_TASKS[_name] = ("minatar.toml", [f'env.id="{_id}"', "env.kwargs='{}'"], _ref, 5_000_000, 1800)
    SUITE_REFERENCES[_name] = (f"MinAtar paper AC(lambda): about {_ref} at 5M (read off its curves; "
                               "sticky actions 0.1, no cap, as here)")
    SUITES.setdefault("minatar_paper", []).append(_name)

# Memory (POPGym's definitions, mpirl's C++ ports: envs/popgym.h): the Easy and Medium levels of
# the four tasks mpirl ships, with each recurrent core, one config (configs/memory.toml; only env.id
# and model.core change). The table is cores by tasks (bench/results_page.py). Returns lie in
# [-1, 1] (StatelessCartPole: [0, 1]). No reference at this budget: POPGym's figures are a
# different metric (MMER) at a larger budget, quoted beside the table in docs/algorithms.md.
MEMORY_ENVS = ["RepeatPreviousEasy", "RepeatPreviousMedium", "RepeatFirstEasy", "RepeatFirstMedium",
               "CountRecallEasy", "CountRecallMedium", "StatelessCartPoleEasy", "StatelessCartPoleMedium"]
MEMORY_CORES = ["lru", "gru", "mingru", "ffm", "lstm", "ssm"]
MEMORY_BUDGET = 1_000_000
for _id in MEMORY_ENVS:
    for _core in MEMORY_CORES:
        _name = f"memory_{_core}_{_id.lower()}"
        SUITE_TASKS[_name] = ("memory.toml", [f'env.id="{_id}"', f'model.core="{_core}"'], None, MEMORY_BUDGET, 1800)
        SUITE_REFERENCES[_name] = "-"
        SUITES.setdefault("memory", []).append(_name)

# R2D2 (issue 43; configs/r2d2_*.toml): MinAtar's five games against the MinAtar paper's DQN at 5M
# frames (its curves, as the issue reads them: about 17, 10, 50, 20 and 43), with that DQN's settings
# (sticky actions 0.1, no cap) and network (model.encoder = "minatar_cnn"), and
# CartPole against CleanRL's PPO figure (no DQN figure at this budget is quoted here).
R2D2_MINATAR = {"Asterix-MinAtar": 17.0, "Breakout-MinAtar": 10.0, "Freeway-MinAtar": 50.0, "Seaquest-MinAtar": 20.0,
                "SpaceInvaders-MinAtar": 43.0}
for _id, _ref in R2D2_MINATAR.items():
    _name = "r2d2_minatar_" + _id.split("-")[0].lower()
    SUITE_TASKS[_name] = ("r2d2_minatar.toml", [f'env.id="{_id}"'], _ref, 5_000_000, 3600)
    SUITE_REFERENCES[_name] = f"MinAtar paper DQN: about {_ref} at 5M frames (read off its curves)"
    SUITES.setdefault("r2d2_minatar", []).append(_name)
SUITE_TASKS["r2d2_cartpole"] = ("r2d2_cartpole.toml", [], 490.04, 600_000, 1800)
SUITE_REFERENCES["r2d2_cartpole"] = "CleanRL ppo.py: 490.04 +- 6.12 at 500k steps (3 seeds)"
SUITES["r2d2_classic"] = ["r2d2_cartpole"]

# Atari (issue 41; a GPU lend only): Breakout with a GPU learner and central inference (one inference
# rank, 2 env groups per actor), configs/atari_breakout.toml as shipped (ale-py v5: sticky actions
# 0.25, full episodes, rewards clipped on the learner), against CleanRL's ppo_atari at 10M steps
# (docs/rl-algorithms/ppo.md: BreakoutNoFrameskip-v4, no sticky actions, a life loss ends its
# training episode, 3 seeds). A lend's call is 10 minutes, so bench/gpu_check.sh (part "learn")
# cuts the run by run.max_wall_seconds and the row's env steps say how far it got.
ATARI = {"ale:breakout": (414.66, 28.09)}
for _id, _ref in ATARI.items():
    _name = "atari_gpu_" + _id.split(":")[-1]
    SUITE_TASKS[_name] = ("atari_breakout.toml", [f'env.id="{_id}"', 'learner.device="cuda"', 'actor.inference="central"',
                                                  "actor.env_groups=2"], _ref[0], 10_000_000, 3600)
    SUITE_REFERENCES[_name] = (f"CleanRL ppo_atari: {_ref[0]} +- {_ref[1]} at 10M steps (3 seeds; "
                               "v4 NoFrameskip: no sticky actions, life loss ends a training episode)")
    SUITES.setdefault("atari", []).append(_name)


def memory_cell(task):
    """(env id, core) of a memory suite task, or None for other suites' tasks."""
    if not task.startswith("memory_"):
        return None
    sets = dict(s.split("=", 1) for s in SUITE_TASKS[task][1])
    return sets["env.id"].strip('"'), sets["model.core"].strip('"')


# The reference's own wall time per run where one is known (s): CleanRL's ppo_continuous_action
# took about 25 min per 1M-step run on HalfCheetah and Hopper (the reading of CleanRL's
# runtime table; its machine is not this one). bench/results_page.py puts mpirl's time to the
# reference score beside it.
SUITE_REFERENCE_WALL_S = {"mujoco_halfcheetah": 25 * 60, "mujoco_hopper": 25 * 60,
                          "mujoco_native_halfcheetah": 25 * 60, "mujoco_native_hopper": 25 * 60}
# kenjyoung/MinAtar's examples/dqn.py on Breakout, timed on this machine by
# bench/minatar_dqn_reference.py (its figure extrapolated to the reference's 5M frames).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "r2d2",
                       "minatar_dqn_reference.json")) as _f:
    SUITE_REFERENCE_WALL_S["r2d2_minatar_breakout"] = json.load(_f)["estimated_wall_s_for_5000000_frames"]
