#!/usr/bin/env python3
"""model.python (issue 42): PyTorch modules trained by the C++ learner, in mpi_test.py's style.
The modules are the ones docs/your-own-model.md shows, taken from the page as it is written.
  learn_cartpole_python        mlp.py on CartPole (configs/classic.toml as it is, PopArt included) to the
                               built-in's bar (400)
  learn_cartpole_tied_python   mlp.py with a weight tied between actor and critic: learns, and
                               model.pt holds the weight once
  learn_repeat_previous_python gated.py (a gated linear core on mpirl_ops.linear_scan) on
                               RepeatPreviousEasy (configs/memory.toml) to the built-in LRU's bar (0.8)
  python_model_paths           mlp.py with central inference, then resumed from its checkpoint,
                               then played by `mpirl eval` and written by `mpirl export` (the value
                               in return units through PopArt's scale and shift)
  bad_python_models            each start-up failure the page lists: exit 2 on every rank, one line
                               naming model.python and the method, no run directory; and PopArt with a
                               module that has no value_head
Run one: python_model_test.py --mpirl build/mpirl CASE"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_test  # noqa: E402
from mpi_test import check, finished_run, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "your-own-model.md")
CONFIGS = os.path.join(ROOT, "configs")


def page_files():
    """{file name: code} of every "`name.py`:" followed by a python block on the page."""
    text = open(PAGE).read()
    files = dict(re.findall(r"`(\w+\.py)`:\n\n```python\n(.*?)```", text, re.S))
    check({"mlp.py", "gated.py"} <= set(files), f"the page shows mlp.py and gated.py (found {sorted(files)})")
    return files


def write(args, name, code):
    d = os.path.join(os.path.abspath(args.workdir), "python-models")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(code)
    return path


def learn(args, file, sets, config, budget, accept, stop, code=None):
    seed = int(os.environ.get("MPIRL_SEED", "1"))
    path = write(args, file, code if code is not None else page_files()[file])
    p, dt, d = run(args, 4, [f'model.python="{path}:make"', *sets, f"run.seed={seed}",
                             f"run.total_env_steps={budget}", "run.max_wall_seconds=900", f"run.stop_mean_return={stop}",
                             "run.log_interval_s=5"], 1000, config=os.path.join(CONFIGS, config))
    check(p.returncode == 0, f"the run exits 0 (got {p.returncode})")
    check("model.python" in p.stdout + p.stderr, "the learner's log names model.python")
    s = finished_run(p, d, 1)
    r = s["final_mean_return"]
    print(f"RESULT {file} on {sets} seed {seed}: mean return {r} over the last 100 episodes after {s['env_steps']} "
          f"env steps in {s['wall_time_s']:.1f} s ({s['stop_reason']}, {s['sps']:.0f} SPS)")
    check(r is not None and r >= accept, f"mean return {r} >= {accept}")
    import torch
    names = list(torch.jit.load(os.path.join(d, "model.pt")).state_dict())
    check(names and all(n.startswith("py.") or n in ("obs_shift", "obs_scale", "value_shift", "value_scale")
                        for n in names), f"model.pt holds the module's tensors as py.* ({names[:6]})")
    return d


def case_learn_cartpole_python(args):
    learn(args, "mlp.py", ['env.id="CartPole-v1"'], "classic.toml", 500000, 400, 450)


def case_learn_cartpole_tied_python(args):
    # mlp.py with the critic's first layer tied to the actor's (one parameter under two names):
    # the optimizer, the flat broadcast and model.pt must hold it once, and CartPole still learns.
    code = page_files()["mlp.py"]
    anchor = "        self.log_std = "
    check(anchor in code, "mlp.py sets log_std (where the tie goes)")
    code = code.replace(anchor, "        self.critic[0].weight = self.actor[0].weight  # tied\n" + anchor, 1)
    d = learn(args, "mlp_tied.py", ['env.id="CartPole-v1"'], "classic.toml", 500000, 400, 450, code=code)
    import torch
    names = list(torch.jit.load(os.path.join(d, "model.pt")).state_dict())
    check("py.actor.0.weight" in names and "py.critic.0.weight" not in names and "py.critic.0.bias" in names,
          "model.pt holds the tied weight once (py.actor.0.weight; no py.critic.0.weight)")


def case_learn_repeat_previous_python(args):
    learn(args, "gated.py", ['env.id="RepeatPreviousEasy"'], "memory.toml", 1000000, 0.8, 0.9)


def case_python_model_paths(args):
    path = write(args, "mlp.py", page_files()["mlp.py"])
    # classic.toml's synchronous actors need local inference: this case is about central inference
    sets = [f'model.python="{path}:make"', 'actor.inference="central"', "actor.synchronous=false",
            "run.total_env_steps=40000", 'run.checkpoint="end"', "run.log_interval_s=1"]
    p, dt, d = run(args, 5, sets, 300, config=os.path.join(CONFIGS, "classic.toml"))
    s = finished_run(p, d, 40000)
    check(s["final_checkpoint_written"], "central inference with a Python model: the run ends with a checkpoint")
    first = s["learner_updates"]
    p2, dt2, _ = mpi_test.run_resume(args, d, ["run.total_env_steps=80000"], 300)
    s2 = finished_run(p2, d, 80000)
    check(s2["segment"] == 1 and s2["learner_updates"] > first,
          f"resumed from the checkpoint: updates {first} -> {s2['learner_updates']}")
    out = os.path.join(d, "eval_result.json")
    r = subprocess.run([args.mpirl, "eval", d, "--episodes", "5", "--json", out], env=mpi_test.ENV,
                       capture_output=True, text=True, timeout=300)
    sys.stdout.write(r.stdout[-2000:] + r.stderr[-2000:])
    check(r.returncode == 0 and os.path.exists(out), f"mpirl eval plays the run's Python model (exit {r.returncode})")
    ev = json.load(open(out))
    print(json.dumps(ev)[:400])
    check(ev.get("episodes") == 5, f"5 episodes played ({ev.get('episodes')})")
    export_python_model(args, d, path)


def export_python_model(args, d, path):
    """`mpirl export` of the run: the TorchScript file (the traced step) against the module built
    here from mlp.py with model.pt's py.* tensors and the run's observation normalisation
    (classic.toml has model.obs_norm on: obs_shift/obs_scale are the learners' running statistics),
    computed by hand; then ONNX where onnx is installed; then the refusal when the file is gone."""
    import importlib.util
    import shutil

    import torch
    ts = os.path.join(d, "policy.ts")
    r = subprocess.run([args.mpirl, "export", d, "--out", ts], env=mpi_test.ENV, capture_output=True, text=True,
                       timeout=300)
    sys.stdout.write(r.stdout[-2000:] + r.stderr[-2000:])
    check(r.returncode == 0 and os.path.exists(ts), f"mpirl export writes the Python model's step (exit {r.returncode})")
    model_json = json.load(open(os.path.join(d, "policy.json")))["model"]
    check(model_json.get("encoder") == "python" and model_json.get("state_size") == 0
          and model_json.get("python") == f"{path}:make",
          f"policy.json records the Python module, not the built-in keys: {model_json}")
    weights = torch.jit.load(os.path.join(d, "model.pt")).state_dict()
    check(float((weights["obs_scale"] - 1).abs().max()) > 1e-3, "the run's obs normalisation is not the identity")
    check(float((weights["value_scale"] - 1).abs().max()) > 1e-3 and float(weights["value_shift"].abs().max()) > 1e-3,
          f"PopArt (classic.toml's value_norm) moved the value's scale and shift: {weights['value_scale'].item():.4g}, "
          f"{weights['value_shift'].item():.4g}")
    mod_spec = importlib.util.spec_from_file_location("mlp_for_export_test", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    module = mod.make({"obs_shape": [4], "obs_uint8": False, "discrete": True, "num_actions": 2, "action_dim": 0,
                       "action_low": [], "action_high": [], "id": "CartPole-v1", "max_episode_steps": 500}, {})
    module.load_state_dict({k[3:]: v for k, v in weights.items() if k.startswith("py.")})
    obs = torch.randn(7, 4, generator=torch.Generator().manual_seed(3)) * 2
    normed = ((obs - weights["obs_shift"]) * weights["obs_scale"]).clamp(-10, 10)
    with torch.no_grad():
        want_d, want_v, _ = module.step(normed, torch.zeros(7), torch.zeros(7, 0))
        want_v = weights["value_scale"] * want_v + weights["value_shift"]  # PopArt's return units
        got_d, got_v = torch.jit.load(ts)(obs)
    diff = max(float((got_d - want_d).abs().max()), float((got_v - want_v).abs().max()))
    print(f"exported step vs mlp.py by hand (batch 7): max abs diff {diff:.3g}")
    check(diff < 1e-5, f"the exported file computes the run's policy (max abs diff {diff:.3g})")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from mpirl_policy import load_policy
    policy = load_policy(d)
    with torch.no_grad():
        lp_d, lp_v = policy(obs)
    actions, state = policy.act(obs.numpy(), greedy=True)
    lp = max(float((lp_d - want_d).abs().max()), float((lp_v - want_v).abs().max()))
    print(f"mpirl_policy.load_policy(run) vs mlp.py by hand: max abs diff {lp:.3g}")
    check(lp < 1e-5 and state is None and torch.equal(actions, want_d.argmax(-1)),
          f"load_policy of a model.python run computes the run's policy (max abs diff {lp:.3g})")
    if importlib.util.find_spec("onnx") is not None:
        r = subprocess.run([args.mpirl, "export", d, "--out", os.path.join(d, "policy.onnx"), "--format", "onnx"],
                           env=mpi_test.ENV, capture_output=True, text=True, timeout=300)
        sys.stdout.write(r.stdout[-1000:] + r.stderr[-1000:])
        check(r.returncode == 0, f"mpirl export --format onnx of a Python model (exit {r.returncode})")
    # A module that no longer matches the run (policy.json's state_size edited to say so): refused.
    pj = os.path.join(d, "policy.json")
    original = open(pj).read()
    edited = json.loads(original)
    edited["model"]["state_size"] = 3
    with open(pj, "w") as f:
        json.dump(edited, f)
    try:
        r = subprocess.run([args.mpirl, "export", d, "--out", os.path.join(d, "changed.ts")], env=mpi_test.ENV,
                           capture_output=True, text=True, timeout=300)
    finally:
        with open(pj, "w") as f:
            f.write(original)
    print(r.stderr.strip())
    check(r.returncode == 2 and "state_size 0" in r.stderr and "had 3" in r.stderr,
          f"a module whose state_size changed since training is refused (exit {r.returncode})")
    moved = path + ".moved"
    shutil.move(path, moved)
    try:
        r = subprocess.run([args.mpirl, "export", d, "--out", os.path.join(d, "gone.ts")], env=mpi_test.ENV,
                           capture_output=True, text=True, timeout=300)
    finally:
        shutil.move(moved, path)
    print(r.stderr.strip())
    check(r.returncode == 2 and "model.python" in r.stderr and "not found" in r.stderr
          and len(r.stderr.strip().splitlines()) == 1, "a missing model file: exit 2, one line naming model.python")


# (file contents, what the message must say). Each is model.python = "<file>:make" unless named.
BAD = {
    "missing_file": (None, "not found"),
    "no_factory": ("import torch\n", "has no function 'make'"),
    "not_a_module": ("def make(spec, options):\n    return 42\n", "expected a torch.nn.Module"),
    "no_unroll": ("import torch\nclass M(torch.nn.Module):\n    def step(self, o, i, s):\n        return o, o, s\n"
                  "def make(spec, options):\n    return M()\n", "has no method unroll()"),
    "wrong_shape": ("import torch\nclass M(torch.nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n        self.l = torch.nn.Linear(4, 3)\n"
                    "    def step(self, o, i, s):\n        return self.l(o), self.l(o)[..., 0], s\n"
                    "    def unroll(self, o, i, s):\n        return self.l(o), self.l(o)[..., 0]\n"
                    "def make(spec, options):\n    return M()\n", "dist has shape [3, 3], expected [3, 2]"),
    "raises": ("import torch\nclass M(torch.nn.Module):\n    def step(self, o, i, s):\n"
               "        raise ValueError('my bug')\n    def unroll(self, o, i, s):\n        raise ValueError('my bug')\n"
               "def make(spec, options):\n    return M()\n", "ValueError: my bug"),
    "not_finite": ("import torch\nclass M(torch.nn.Module):\n    def step(self, o, i, s):\n"
                   "        return torch.full(o.shape[:-1] + (2,), float('nan')), o[..., 0], s\n"
                   "    def unroll(self, o, i, s):\n        return self.step(o, i, s)[:2]\n"
                   "def make(spec, options):\n    return M()\n", "is not finite"),
    # A recurrent module that ignores is_init: its unroll and its steps disagree where a reset is.
    "no_reset": ("import torch\nclass M(torch.nn.Module):\n    state_size = 4\n"
                 "    def __init__(self):\n        super().__init__()\n        self.l = torch.nn.Linear(8, 2)\n"
                 "    def step(self, o, i, s):\n        s = 0.5 * s + o\n"
                 "        return self.l(torch.cat([o, s], -1)), s[..., 0], s\n"
                 "    def unroll(self, o, i, s):\n        d, v = [], []\n"
                 "        for t in range(o.shape[0]):\n"
                 "            s = (1 - i[t]).unsqueeze(-1) * 0.5 * s + o[t]\n"
                 "            d.append(self.l(torch.cat([o[t], s], -1))); v.append(s[..., 0])\n"
                 "        return torch.stack(d), torch.stack(v)\n"
                 "def make(spec, options):\n    return M()\n", "unroll() and step() disagree"),
}


def case_bad_python_models(args):
    for name, (code, says) in BAD.items():
        path = os.path.join(os.path.abspath(args.workdir), "python-models", "absent.py") if code is None else \
            write(args, f"bad_{name}.py", code)
        print(f"--- {name}")
        p, dt, d = run(args, 4, [f'model.python="{path}:make"', 'learner.value_norm="none"'], 120)
        check(p.returncode == 2, f"{name}: exit code 2 (got {p.returncode})")
        check("model.python" in p.stderr and says in p.stderr, f"{name}: the message names model.python and says "
                                                                 f"{says!r}: {p.stderr.strip()[-600:]}")
        check(p.stderr.count("config error") == 1, f"{name}: one error, printed once (by rank 0)")
        check(not os.path.exists(d), f"{name}: no run directory created")
    # PopArt (the default value_norm) rescales the module's value_head: mlp.py without one is refused.
    code = page_files()["mlp.py"].replace("value_head", "value_out")
    path = write(args, "mlp_no_value_head.py", code)
    p, dt, d = run(args, 4, [f'model.python="{path}:make"'], 120)
    check(p.returncode == 2 and "popart" in p.stderr and "no parameter value_head.weight or value_head.bias" in p.stderr
          and not os.path.exists(d), f"PopArt with a module without value_head: exit 2 naming it ({p.returncode})")


if __name__ == "__main__":
    mpi_test.main(globals())
