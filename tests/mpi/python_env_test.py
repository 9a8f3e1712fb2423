#!/usr/bin/env python3
"""MPI tests of Python envs (env.id = "gym:<id>" / "py:<module>:<factory>"), in mpi_test.py's style:
a short job on each prefix, a Python exception and a NaN reward in an actor end the job quickly
with a message naming the env, the rank and the step, unsupported spaces are refused at start with
exit 2, and APPO learns gym:CartPole-v1. The test envs are tests/python/mpirl_test_envs.py."""
import json
import os
import re
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning_test  # noqa: E402
import mpi_test  # noqa: E402
from mpi_test import bad, check, command, finished_run, run, ranks_left  # noqa: E402

PYDIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
mpi_test.ENV["PYTHONPATH"] = PYDIR + os.pathsep + os.environ.get("PYTHONPATH", "")
SCRIPTED = 'env.id="py:mpirl_test_envs:scripted"'


def case_python_short_jobs(args):
    for env_id in ("gym:CartPole-v1", "py:mpirl_test_envs:cartpole", "gym:Pendulum-v1"):
        p, dt, d = run(args, 4, [f'env.id="{env_id}"', "run.total_env_steps=20000"], 180)
        finished_run(p, d, 20000)
    # truncations every few steps exercise the actor's bootstrap slots
    p, dt, d = run(args, 4, [SCRIPTED, "run.total_env_steps=20000"], 180)
    finished_run(p, d, 20000)
    # the library fast paths, pixels through the CNN encoders included
    for env_id, steps, extra in (("envpool:CartPole-v1", 20000, []), ("minatar:breakout", 10000, []),
                                 ("ale:breakout", 1024, ["env.num_envs=2", "actor.rollout_len=16", "learner.batch_size=4"])):
        p, dt, d = run(args, 4, [f'env.id="{env_id}"', f"run.total_env_steps={steps}", *extra], 240)
        finished_run(p, d, steps)
        if env_id.startswith("ale:"):  # frame-stacked Atari frames travel compressed by default
            m = re.search(r"rollouts arrived with compressed observations: .*?, ([0-9.]+)x", p.stdout + p.stderr)
            check(m is not None and float(m.group(1)) >= 4, f"Breakout frames compressed >= 4x ({m and m.group(0)})")
        if env_id.startswith("minatar"):  # mpirl eval plays a Python env's saved policy too
            e = subprocess.run([args.mpirl, "eval", d, "--episodes", "5"], capture_output=True, text=True, timeout=120,
                               env=mpi_test.ENV)
            print(e.stdout, e.stderr)
            check(e.returncode == 0 and "5 episodes of minatar:breakout" in e.stdout, "mpirl eval plays minatar:breakout")


def fails_fast(args, kwargs, reason):
    """Runs a job whose actors' env 1 goes wrong; the job must end non-zero within 10 s of the
    error, with a message naming the env, an actor rank and the step, and no rank left running."""
    out_dir = os.path.join(args.workdir, f"t-{uuid.uuid4().hex[:8]}")
    cmd = command(args, 4, [SCRIPTED, f"env.kwargs='{kwargs}'", "run.total_env_steps=100000000"], out_dir)
    p = subprocess.Popen(cmd, env=mpi_test.ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t_error, err = None, []
    for line in p.stderr:
        err.append(line)
        if t_error is None and reason in line:
            t_error = time.time()
    p.wait(timeout=120)
    t_exit = time.time()
    text = "".join(err)
    sys.stdout.write(text[-2500:])
    check(p.returncode != 0, f"job exit code {p.returncode} != 0")
    check(t_error is not None, f"the error says {reason!r}")
    check(t_exit - t_error < 10, f"job gone {t_exit - t_error:.1f} s after the error (< 10 s)")
    m = re.search(r"env 'py:mpirl_test_envs:scripted' on actor rank (\d+)[^:]* at vector step (\d+)", text)
    check(m is not None and m.group(1) in ("2", "3"), "the message names the env and the actor rank")
    check(m is not None and m.group(2) == "30", "the message names the step")
    left = ranks_left(out_dir)
    check(not left, f"no rank left running ({left})")


def case_python_exception_aborts(args):
    fails_fast(args, '{"raise_at": 30, "bad_env": 1}', "RuntimeError: scripted failure in env 1")


def case_python_nan_reward_aborts(args):
    fails_fast(args, '{"nan_at": 30, "bad_env": 1}', "env index 1 returned a non-finite reward")


def case_python_bad_space(args):
    bad(args, ['env.id="gym:Blackjack-v1"'], "unsupported observation space Tuple")
    bad(args, [SCRIPTED, """env.kwargs='{"obs_space": "dict"}'"""], "unsupported observation space Dict")
    bad(args, [SCRIPTED, """env.kwargs='{"autoreset_mode": "NextStep"}'"""], "autoreset mode NextStep")
    p = bad(args, ['env.id="py:no_such_module:make"'], "No module named 'no_such_module'")
    # The hint says where py: modules are looked for: the directory mpirun was started in (the
    # ranks run there) and PYTHONPATH, and how to add a directory.
    cwd = f"the directory mpirl runs in, here '{os.getcwd()}'"
    check(cwd in p.stderr and "export PYTHONPATH=" in p.stderr,
          f"the hint names the working directory ({cwd}) and PYTHONPATH")
    bad(args, ['env.id="py:mpirl_test_envs:pixels"', """env.kwargs='{"shape": [12, 12, 3]}'"""], "looks channels-last")


def case_python_own_env_time_limit(args):
    # A user's own env without a declared time limit: truncations are bootstrapped (room for one
    # per rollout); a limit declared on the sub-envs (TimeLimit, an attribute) is read; an env that
    # truncates more often than it declares ends the job with the fix, and no secondary errors.
    endless = 'env.id="py:mpirl_test_envs:endless"'
    for kwargs in ('{"truncate_at": 40}', '{"truncate_at": 5, "declare": "timelimit"}',
                   '{"truncate_at": 5, "declare": "attr"}'):
        p, dt, d = run(args, 4, [endless, f"env.kwargs='{kwargs}'", "run.total_env_steps=20000"], 180)
        s = finished_run(p, d, 20000)
        lc = s["learner_counts"]
        check(lc["bootstraps"] > 0 and lc["bootstraps"] == lc["truncations"],
              f"{kwargs}: every truncation bootstrapped ({lc['bootstraps']} of {lc['truncations']})")
    p, dt, d = run(args, 4, [endless, """env.kwargs='{"truncate_at": 5}'""", "run.total_env_steps=100000000"], 120)
    text = p.stdout + p.stderr
    check(p.returncode != 0 and "declares no time limit" in text and "TimeLimit" in text,
          "truncating more often than one per rollout without a declared limit: the error names the fix")
    secondary = [l for l in text.splitlines() if "malformed message" in l or "preempted" in l]
    check(not secondary, f"no secondary errors from other ranks ({secondary[:3]})")
    fatal = [l for l in text.splitlines() if "mpirl: fatal error on" in l]
    check(fatal and all("declares no time limit" in l for l in fatal),
          f"every fatal error is the env's own ({len(fatal)} actor(s) met it)")
    # Learner 0 notes the launcher's teardown only if its SIGTERM reached it before Open MPI ended
    # it at once (a peer's hang-up can): it logs the note, then writes summary.json saying "aborted".
    notes = [l for l in text.splitlines() if "launcher is ending the job" in l]
    aborted = os.path.exists(os.path.join(d, "summary.json")) and mpi_test.summary(d)["stop_reason"] == "aborted"
    check((notes or not aborted) and all("consequence" in l for l in notes),
          f"the learner's note on the job's end calls it a consequence ({len(notes)} note(s); summary.json "
          f"{'says aborted' if aborted else 'does not say aborted: learner 0 was ended before it could note it'})")


def video_frames(path):
    """Frames in an MP4 as ffprobe decodes them (every frame read, not the header's count)."""
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                          "stream=nb_read_frames,width,height,codec_name", "-of", "json", path],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["streams"][0]


def case_video(args):
    # mpirl eval --video: the built-in CartPole drawn from its observations, gym:CartPole-v1 by its
    # own render(); the decoded frames are the first observation plus one per step of the episodes
    # (lengths counted by the env); an env with nothing to draw is refused with the fix.
    for env_id, source in (("CartPole-v1", "drawn from the observations"), ("gym:CartPole-v1", "the env's render()")):
        p, dt, d = run(args, 4, [f'env.id="{env_id}"', "run.total_env_steps=20000"], 180)
        finished_run(p, d, 20000)
        mp4, js = os.path.join(d, "play.mp4"), os.path.join(d, "play.json")
        e = subprocess.run([args.mpirl, "eval", d, "--episodes", "3", "--video", mp4, "--json", js],
                           capture_output=True, text=True, timeout=300, env=mpi_test.ENV)
        print(e.stdout, e.stderr)
        check(e.returncode == 0 and source in e.stdout, f"{env_id}: a video {source}")
        lengths = json.load(open(js))["lengths"]
        st = video_frames(mp4)
        check(st["codec_name"] == "h264" and (st["width"], st["height"]) == (600, 400), f"{env_id}: H.264, 600x400")
        check(int(st["nb_read_frames"]) == 1 + sum(lengths),
              f"{env_id}: {st['nb_read_frames']} frames decoded = 1 + the episodes' {int(sum(lengths))} steps")
    p, dt, d = run(args, 4, [SCRIPTED, "run.total_env_steps=5000"], 180)
    e = subprocess.run([args.mpirl, "eval", d, "--video", os.path.join(d, "x.mp4")], capture_output=True, text=True,
                       timeout=120, env=mpi_test.ENV)
    check(e.returncode == 2 and "renders no frames" in e.stderr and "render_mode" in e.stderr,
          f"an env with nothing to draw: exit 2 naming the fix ({e.stderr.strip()[:160]})")


def case_own_env_walkthrough(args):
    # The walk-through of docs/environments.md as written: its corridor.py (the same text,
    # checked), run from the directory that holds it with the page's command; it must stop on its
    # threshold and the greedy policy must walk straight to the end.
    page = open(os.path.join(os.path.dirname(PYDIR), "..", "docs", "environments.md")).read()
    block = re.search(r"```python\n(# corridor.py\n.*?)```", page, re.S)
    check(block is not None and block.group(1) == open(os.path.join(PYDIR, "corridor.py")).read(),
          "tests/python/corridor.py is docs/environments.md's text")
    out_dir = os.path.join(os.path.abspath(args.workdir), f"t-{uuid.uuid4().hex[:8]}")
    cmd = [args.mpirun, "-n", "4", "--oversubscribe", os.path.abspath(args.mpirl), "train",
           "--set", "env.id=\"py:corridor:make\"", "--set", "run.stop_mean_return=0.9",
           "--set", "run.total_env_steps=2e6", "--set", f"run.out_dir={json.dumps(out_dir)}"]
    env = dict(mpi_test.ENV)
    env.pop("PYTHONPATH", None)  # found from the working directory, as the page says
    p = subprocess.run(cmd, cwd=PYDIR, env=env, capture_output=True, text=True, timeout=600)
    sys.stdout.write(p.stdout[-1500:] + p.stderr[-1500:])
    runs = os.listdir(out_dir)
    check(p.returncode == 0 and len(runs) == 1 and runs[0].startswith("py_corridor_make-impala-"),
          f"the run finished (exit {p.returncode}) as {runs}")
    d = os.path.join(out_dir, runs[0])
    s = mpi_test.summary(d)
    dec = s["stop_decision"]
    check(s["stop_reason"] == "stop_mean_return" and dec["mean_return"] >= 0.9,
          f"stopped on its threshold: mean {dec['mean_return']:.3f} after {dec['env_steps']} env steps")
    e = subprocess.run([os.path.abspath(args.mpirl), "eval", d, "--greedy", "--episodes", "4", "--json",
                        os.path.join(d, "greedy.json")], cwd=PYDIR, env=env, capture_output=True, text=True,
                       timeout=120)
    print(e.stdout, e.stderr)
    g = json.load(open(os.path.join(d, "greedy.json")))
    check(e.returncode == 0 and g["mean_return"] == 1.0 and g["mean_length"] == 7.0,
          f"the greedy policy walks straight to the end (return {g['mean_return']}, {g['mean_length']} steps)")


def case_learn_gym_cartpole_appo(args):
    # The built-in APPO learning test (learning_test.learn), on gym:CartPole-v1.
    learning_test.learn(args, "appo", ['env.id="gym:CartPole-v1"'], env="gym:CartPole-v1")


def case_learn_acrobot(args):
    # configs/acrobot.toml (the defaults, PopArt included, on gym:Acrobot-v1): -100 within 1M env steps.
    learning_test.learn_to(args, "gym:Acrobot-v1", [], -100, -150, 1000000, config="acrobot.toml")


def random_minatar_return(game, episodes=400):
    """A uniform random policy over the minimal action set, with the sticky actions mpirl uses."""
    import numpy as np
    from minatar import Environment
    env, rng, total = Environment(game, sticky_action_prob=0.1), np.random.default_rng(0), 0.0
    env.seed(0)
    actions = env.minimal_action_set()
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            r, done = env.act(actions[rng.integers(len(actions))])
            total += r
    return total / episodes


def case_learn_minatar_breakout(args):
    # Pixels end to end: uint8 images, the IMPALA CNN, APPO, configs/minatar_breakout.toml, for a
    # budget of env steps (not the file's 420 s of wall time, which learned less on a busy machine).
    # One run passed 4x random (about 2) near 160k steps and was at 6-10 by 300-420k; another was
    # at 1.49 after 400k (a fresh-clone CI run), so the budget is the 1M steps of docs/algorithms.md
    # (21.5-34.0 over seeds there). The file's env is now the C++ port Breakout-MinAtar (the
    # package's dynamics: tests/envs/minatar_parity.py; the package's pixels path is still run by
    # mpi.python_short_jobs), so the learner sets the pace, and the budget is 600k: on the port, 4
    # seeds ended 600k at 3.56, 4.33, 14.97 and 13.19 (the lowest two inside Breakout's known dips;
    # 19.2 at 1M), against a bound of about 1.9. The random policy's return is still the package's.
    # The budget is now 250k (CI time: this test was 394 of a 1,980 s ctest on an AMD VM, two
    # cores): four seeds were at 4.98 (seed 1, in that ctest), 5.41, 5.87 and 3.67 (seeds 2-4, run
    # alone) near 250k and 0.85-1.26 at 90k; the bound is still 4x random. Now 200k (CI time again:
    # 216 of the 3,383 CPU-s of a ctest -j3 there, bench/ctest_cpu.py): seeds 1-4 were at 3.23,
    # 4.03, 5.06 and 3.33 at 200k (2.98, 2.65, 3.48, 2.54 at 150k; 4.78, 5.45, 6.34, 4.59 at 250k).
    learn_minatar_breakout(args, "minatar_breakout.toml", 1100, 200000)


def learn_minatar_breakout(args, config_name, timeout, budget=600000, extra=()):
    """Breakout-MinAtar with configs/CONFIG_NAME (and the EXTRA overrides) for BUDGET env steps: at
    least 4x random."""
    config = os.path.join(os.path.dirname(PYDIR), "..", "configs", config_name)
    rnd = random_minatar_return("breakout")
    p, dt, d = run(args, 4, [f"run.total_env_steps={budget}", "run.max_wall_seconds=0", *extra], timeout,
                   config=os.path.normpath(config))
    s = finished_run(p, d, budget)
    curve = [json.loads(line) for line in open(os.path.join(d, "curve.jsonl"))]
    curve = [(m["env_steps"], m["mean_return"]) for m in curve if m.get("mean_return") is not None]
    print(f"RESULT Breakout-MinAtar (configs/{config_name}): mean return {s['final_mean_return']:.2f} over the last "
          f"100 episodes after {s['env_steps']} env steps in {s['wall_time_s']:.0f} s ({s['sps']:.0f} SPS); random "
          f"policy {rnd:.2f}; curve from {curve[0]} to {curve[-1]}")
    check(s["stop_reason"] == "total_env_steps", f"ran to its step budget ({s['stop_reason']})")
    check(s["final_mean_return"] >= max(4 * rnd, rnd + 1.5), f"{s['final_mean_return']:.2f} >= 4x random ({rnd:.2f})")


def case_learn_minatar_suite(args):
    # The MinAtar suite's config (configs/minatar.toml: gymnax's PPO set-up, MLPs on the flattened
    # image, the gymnax preset) on the Breakout port for 300k env steps. Its six seeds were at
    # 3.33-6.38 at about 300k (4.03, 3.59, 3.33 for the tuning seeds 1-3; 6.93, 6.76 and 6.53 at
    # 600k; bench/results/suites/minatar/curves) on their way to 24-28 at 5M; a random policy scores
    # about 0.45, so the bound is 4x random (about 1.9), as learning.minatar_breakout's for the CNN
    # config. 300k, not 600k: the test is in CI's chain of two-core tests (134 s there at 600k).
    # The config anneals the learning rate linearly over run.total_env_steps; cut to 300k, that
    # would halve the mean rate. At 300k of the suite's 10M the rate is still 97% of its start,
    # so the test pins the constant rate: it checks the first 300k steps of the suite's run.
    learn_minatar_breakout(args, "minatar.toml", 600, budget=300000, extra=['learner.lr_schedule="constant"'])


def random_gym_return(env_id, episodes=20):
    """A uniform random policy's mean return on a gymnasium env (seeded)."""
    import gymnasium as gym
    env, total = gym.make(env_id), 0.0
    env.action_space.seed(0)
    for i in range(episodes):
        env.reset(seed=i)
        done = False
        while not done:
            _, r, term, trunc, _ = env.step(env.action_space.sample())
            total += r
            done = term or trunc
    return total / episodes


def case_learn_mujoco_hopper(args):
    # The MuJoCo suite's config (configs/mujoco.toml, issue 41) on gym:Hopper-v4 for 100k env steps
    # (its learning rate anneals to 0 over the budget): seeds 1-3 ended at 499.9, 408.0 and 371.6
    # (about 13 s each, alone) on the AMD VM with AVX-512 with the gradient in closed form
    # (learner.grad_by_hand), 419.5, 621.4 and 646.5 (about 21 s) with autograd's, and 564.6, 334.8
    # and 546.0 before the config's 32 step-minibatches and kl_target; a random policy scores about
    # 26, so the bound is 8x random (about 206) and at least 150. 100k, not 200k (400-903 over six
    # seeds): the test was 130 of the 3,383 CPU-s of a ctest -j3 on that VM (bench/ctest_cpu.py).
    config = os.path.join(os.path.dirname(PYDIR), "..", "configs", "mujoco.toml")
    rnd = random_gym_return("Hopper-v4")
    budget = 100000
    p, dt, d = run(args, 4, [f"run.total_env_steps={budget}", 'env.id="gym:Hopper-v4"'], 900,
                   config=os.path.normpath(config))
    s = finished_run(p, d, budget)
    print(f"RESULT gym:Hopper-v4 appo (configs/mujoco.toml): mean return {s['final_mean_return']:.1f} over the last "
          f"100 episodes after {s['env_steps']} env steps in {s['wall_time_s']:.0f} s ({s['sps']:.0f} SPS); "
          f"random policy {rnd:.1f}")
    check(s["stop_reason"] == "total_env_steps", f"ran to its step budget ({s['stop_reason']})")
    bound = max(8 * rnd, 150.0)
    check(s["final_mean_return"] >= bound, f"{s['final_mean_return']:.1f} >= {bound:.1f} (8x random, at least 150)")


if __name__ == "__main__":
    mpi_test.main(globals())
