#!/usr/bin/env python3
"""The Python policy (python/mpirl_policy) against the C++ one, and `mpirl export`.

parity      policy_dump saves every encoder x core x action space as a run saves it (config.toml,
            model.pt, policy.json) with the C++ outputs on fixed inputs (io.pt); each is rebuilt
            with mpirl_policy.load_policy and compared to TOL (unroll, step by step with the
            state, forward, the actors' greedy actions); a perturbed weight must be caught; the
            TorchScript export of each, run in a process without mpirl_policy, must agree too.
twins       issue 42's built-in twins: the Python policy (python/mpirl_policy, the reference a
            Python model is checked against) of every MLP case, given the C++ policy's weights, in
            float64: outputs, the gradient of every parameter of a fixed loss (to TWIN_TOL), and
            the loss before each of 20 Adam updates on the same batches and the parameters after
            them (to TWIN_TOL relative); a parameter moved by 1e-4 before the updates must be
            caught by the same comparison.
export_cli  `mpirl export` end to end: TorchScript for a recurrent policy (checked in a clean
            process), a model file, a run without policy.json (the env gives the spaces), ONNX (or
            the error naming what to pip install), a bad run directory; for model.python,
            tensors named as models/python_model.cpp saves them (named_parameters and
            named_buffers) loaded into a module with a tied weight and a non-persistent buffer,
            and a recurrent module on uint8 pixels exported and stepped with a reset.
Run one case: test_policy_parity.py --dump build/tests/policy_dump --mpirl build/mpirl
--python-dir python --workdir build/test-runs CASE
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

TOL = 1e-5
TWIN_TOL = 1e-6
ARGS = None


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def diff(a, b):
    check(a.shape == b.shape, f"shapes differ: {list(a.shape)} vs {list(b.shape)}")
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


def load(path):
    return torch.load(path, weights_only=False)  # the dump's own files (a C++ pickle of a dict)


def dump(workdir):
    out = tempfile.mkdtemp(prefix="policy-", dir=workdir)
    r = subprocess.run([ARGS.dump, out], capture_output=True, text=True)
    check(r.returncode == 0, f"policy_dump failed: {r.stderr}")
    return out, r.stdout.split()


def python_outputs(policy, io):
    """What the C++ dump holds, computed by the Python policy: name -> tensor."""
    T = io["obs"].size(0)
    out = {}
    with torch.no_grad():
        out["unroll_dist"], out["unroll_value"], _ = policy.unroll(io["obs"], io["is_init"], io["state0"])
        dists, values, states = [], [], []
        state = io["state0"]
        for t in range(T):
            d, v, state = policy.step(io["obs"][t], io["is_init"][t], state)
            dists.append(d), values.append(v), states.append(state)
        out["step_dist"], out["step_value"], out["step_state"] = map(torch.stack, (dists, values, states))
        if not policy.recurrent:
            out["forward_dist"], out["forward_value"] = policy(io["obs"])
        actions, state = [], None
        for t in range(T):
            a, state = policy.act(io["obs"][t], state, io["is_init"][t], greedy=True)
            actions.append(a)
        out["greedy_actions"] = torch.stack(actions)
    return out


def compare(got, io):
    """Largest difference per output; discrete greedy actions must be equal (inf where they are not)."""
    res = {}
    for k, v in got.items():
        if k == "greedy_actions" and v.dtype == torch.int64:
            res[k] = 0.0 if torch.equal(v, io[k]) else float("inf")
        else:
            res[k] = diff(v, io[k])
    return res


# Loads each exported TorchScript file with torch alone (no mpirl_policy on the path) and writes
# its outputs on the dumped inputs.
CLEAN_RUNNER = r"""
import sys, torch
try:
    import mpirl_policy
    raise SystemExit("mpirl_policy is importable in the clean process")
except ImportError:
    pass
for ts, io_path, out_path in zip(*[iter(sys.argv[1:])] * 3):
    m = torch.jit.load(ts)
    io = torch.load(io_path, weights_only=False)  # our own dump
    out = {}
    with torch.no_grad():
        if hasattr(m, "unroll"):
            out["unroll_dist"], out["unroll_value"], _ = m.unroll(io["obs"], io["is_init"], io["state0"])
            state, d, v = io["state0"], [], []
            for t in range(io["obs"].size(0)):
                dt, vt, state = m(io["obs"][t], io["is_init"][t], state)
                d.append(dt), v.append(vt)
            out["step_dist"], out["step_value"] = torch.stack(d), torch.stack(v)
        else:
            out["forward_dist"], out["forward_value"] = m(io["obs"])
    torch.save(out, out_path)
"""


def run_clean(triples):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    flat = [x for t in triples for x in t]
    r = subprocess.run([sys.executable, "-c", CLEAN_RUNNER] + flat, capture_output=True, text=True, env=env,
                       cwd=tempfile.gettempdir())
    check(r.returncode == 0, f"the clean TorchScript process failed: {r.stderr[-3000:]}")


def perturbation_caught(run_dir, io):
    """A parameter moved by 1e-2 (the first core one, else the first encoder one) must show."""
    from mpirl_policy import build_policy, read_config, read_weights

    weights = read_weights(os.path.join(run_dir, "model.pt"))
    name = sorted(k for k in weights if k.startswith("core.")) or sorted(
        k for k in weights if k.startswith(("encoder.", "torso0.")))
    weights[name[0]] += 1e-2
    spec = json.load(open(os.path.join(run_dir, "policy.json")))
    policy = build_policy(read_config(os.path.join(run_dir, "config.toml")), spec, weights)
    got = python_outputs(policy, io)
    worst = max(diff(got[k], io[k]) for k in ("unroll_dist", "unroll_value"))
    return name[0], worst


def case_parity():
    from mpirl_policy import load_policy
    from mpirl_policy.export import export_torchscript

    torch.set_num_threads(1)
    root, names = dump(ARGS.workdir)
    check(len(names) >= 42, f"policy_dump made {len(names)} cases")
    rows, triples, failures = [], [], []
    for name in names:
        d = os.path.join(root, name)
        io = load(os.path.join(d, "io.pt"))
        policy = load_policy(d)
        res = compare(python_outputs(policy, io), io)
        spec_text = open(os.path.join(d, "policy.json")).read()
        export_torchscript(policy, os.path.join(d, "policy.ts"), spec_text)
        triples.append((os.path.join(d, "policy.ts"), os.path.join(d, "io.pt"), os.path.join(d, "ts_out.pt")))
        pname, pdiff = perturbation_caught(d, io)
        if pdiff <= TOL:
            failures.append(f"{name}: moving {pname} by 1e-2 changed the outputs by only {pdiff:.2e}")
        rows.append((name, res, pdiff))
    run_clean(triples)
    print("max abs diff Python - C++ per case (unroll: dist and value; step: the same step by step; state:\n"
          "the state after each step; greedy: the actors' greedy actions; ts: the TorchScript export run\n"
          "without mpirl_policy), |out|: the largest C++ output, perturbed: the diff after a parameter moved")
    print(f"{'case':34} {'unroll':>9} {'step':>9} {'state':>9} {'forward':>9} {'greedy':>9} {'ts':>9} {'|out|':>9} "
          f"{'perturbed':>9}")
    for (name, res, pdiff), (_, io_path, ts_out) in zip(rows, triples):
        io, ts = load(io_path), load(ts_out)
        res["ts"] = max(diff(v, io[k]) for k, v in ts.items())
        cols = [max(res["unroll_dist"], res["unroll_value"]), max(res["step_dist"], res["step_value"]),
                res["step_state"], max(res.get("forward_dist", 0.0), res.get("forward_value", 0.0)),
                res["greedy_actions"], res["ts"]]
        scale = max(float(io[k].abs().max()) for k in ("unroll_dist", "unroll_value"))
        text = [f"{c:9.2e}" for c in cols]
        if "forward_dist" not in res:
            text[3] = f"{'-':>9}"  # recurrent: no forward()
        print(f"{name:34} " + " ".join(text) + f" {scale:9.2e} {pdiff:9.2e}")
        if max(cols) > TOL:
            failures.append(f"{name}: max abs diff {max(cols):.2e} > {TOL}")
    print(f"{len(rows)} cases, max abs diff over all: {max(max(r[1].values()) for r in rows):.2e} (tolerance {TOL})")
    check(not failures, "\n".join(failures))
    shutil.rmtree(root)


def twin_loss(policy, obs, is_init, state0, w_dist, target):
    dist, value, _ = policy.unroll(obs, is_init, state0)
    return (dist * w_dist).mean() + (value - target).pow(2).mean()


def twin_run(d, tw, nudge=None):
    """The Python twin of the C++ dump in d, in float64: (outputs, grads, losses, final parameters),
    keyed by the C++ names. nudge: a C++ parameter name moved by 1e-4 first (the test's own check
    that the comparison can fail)."""
    from mpirl_policy import load_policy
    from mpirl_policy.policy import cpp_name

    policy = load_policy(d).double().train()
    named = {cpp_name(k): v for k, v in policy.named_parameters()}
    if nudge:
        with torch.no_grad():
            named[nudge].view(-1)[0] += 1e-4
    with torch.no_grad():
        dist, value, _ = policy.unroll(tw["obs"], tw["is_init"], tw["state0"])
    loss = twin_loss(policy, tw["obs"], tw["is_init"], tw["state0"], tw["w_dist"], tw["target"])
    policy.zero_grad()
    loss.backward()
    grads = {k: (v.grad.clone() if v.grad is not None else torch.zeros_like(v)) for k, v in named.items()}
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    losses = []
    for k in range(tw["losses"].numel()):
        opt.zero_grad()
        l = twin_loss(policy, tw["batch_obs"][k], tw["batch_init"][k], tw["batch_state0"][k], tw["w_dist"],
                      tw["batch_target"][k])
        l.backward()
        opt.step()
        losses.append(l.item())
    final = {k: v.detach().clone() for k, v in named.items()}
    return {"unroll_dist": dist, "unroll_value": value, "loss": loss.detach()}, grads, torch.tensor(
        losses, dtype=torch.float64), final


def twin_compare(tw, outs, grads, losses, final):
    """Largest differences: outputs, gradients, losses (relative), final parameters."""
    out = max(diff(outs[k], tw[k]) for k in ("unroll_dist", "unroll_value", "loss"))
    cpp_grads = {k[5:]: v for k, v in tw.items() if k.startswith("grad.")}
    check(set(cpp_grads) == set(grads), f"parameters differ: C++ {sorted(cpp_grads)} vs Python {sorted(grads)}")
    grad = max(diff(grads[k], v) for k, v in cpp_grads.items())
    scale = float(tw["losses"].abs().max())
    loss = diff(losses, tw["losses"]) / max(scale, 1e-12)
    par = max(diff(final[k], tw["final." + k]) / max(float(tw["final." + k].abs().max()), 1e-12) for k in final)
    return out, grad, loss, par


def case_twins():
    torch.set_num_threads(1)
    root, names = dump(ARGS.workdir)
    twins = [n for n in names if os.path.exists(os.path.join(root, n, "twin.pt"))]
    for want in ("mlp-none-discrete", "mlp-none-box", "mlp-lru-discrete", "mlp-lru-box"):
        check(want in twins, f"policy_dump wrote no twin.pt for {want}")
    print("the Python policy in float64 against the C++ one (max abs diff; loss and parameters relative):")
    print(f"{'case':30} {'outputs':>9} {'grads':>9} {'20 losses':>9} {'params':>9} {'|grad|':>9} "
          f"{'nudged':>9}  nudged parameter")
    failures = []
    for name in twins:
        d = os.path.join(root, name)
        tw = load(os.path.join(d, "twin.pt"))
        res = twin_compare(tw, *twin_run(d, tw))
        gscale = max(float(v.abs().max()) for k, v in tw.items() if k.startswith("grad."))
        # The comparison must see a parameter moved by 1e-4 (a core one where there is a core).
        params = sorted(k[5:] for k in tw if k.startswith("grad."))
        nudge = next((k for k in params if k.startswith("core.")), next(k for k in params if k.startswith("torso")))
        moved = twin_compare(tw, *twin_run(d, tw, nudge))
        print(f"{name:30} " + " ".join(f"{v:9.2e}" for v in res) + f" {gscale:9.2e} {max(moved):9.2e}  {nudge}")
        if max(res) > TWIN_TOL:
            failures.append(f"{name}: outputs/grads/losses/params differ by {', '.join(f'{v:.2e}' for v in res)} "
                            f"(tolerance {TWIN_TOL})")
        if max(moved) <= TWIN_TOL:
            failures.append(f"{name}: moving {nudge} by 1e-4 went unseen ({max(moved):.2e})")
        check(gscale > 1e-3, f"{name}: the gradients are all near zero ({gscale:.2e}): nothing is compared")
    print(f"{len(twins)} twins within {TWIN_TOL}" if not failures else "")
    check(not failures, "\n".join(failures))
    shutil.rmtree(root)


def mpirl_export(run_dir, out, *extra):
    r = subprocess.run([ARGS.mpirl, "export", run_dir, "--out", out, *extra], capture_output=True, text=True)
    print(f"$ mpirl export {run_dir} --out {out} {' '.join(extra)} -> {r.returncode}\n{r.stdout}{r.stderr}", end="")
    return r


def python_model_weights():
    """PythonModelPolicy.load_weights takes model.pt's py.* tensors as the C++ learner saves them
    (named_parameters and named_buffers): a tied weight once, under its first name, and a
    non-persistent buffer. The module loaded from another instance's tensors must compute what
    that instance computes."""
    from mpirl_policy.python_model import PythonModelPolicy

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = self.a  # tied: one parameter under two names
            self.head = torch.nn.Linear(4, 2)
            self.register_buffer("gain", torch.rand(4), persistent=False)

        def step(self, o, i, s):
            h = torch.tanh(self.b(torch.tanh(self.a(o))) * self.gain)
            return self.head(h), h[..., 0], s

    spec = {"obs_shape": [4], "obs_uint8": False, "discrete": True, "num_actions": 2, "action_dim": 0,
            "action_low": [], "action_high": [], "id": "test", "max_episode_steps": 0}
    torch.manual_seed(1)
    source = Tied()
    torch.manual_seed(2)
    target = PythonModelPolicy(Tied(), spec, {"model": {}})
    saved = {"py." + k: v.detach().clone() for k, v in
             list(source.named_parameters()) + list(source.named_buffers())}
    check("py.b.weight" not in saved and "py.gain" in saved, f"the saved names are not as C++ saves them: {sorted(saved)}")
    saved["value_shift"], saved["value_scale"] = torch.tensor([0.5]), torch.tensor([2.0])
    target.load_weights(saved)
    obs = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want_d, want_v, _ = source.step(obs, None, None)
        got_d, got_v = target(obs)
    worst = max(diff(got_d, want_d), diff(got_v, 2.0 * want_v + 0.5))
    print(f"load_weights with a tied weight and a non-persistent buffer: max abs diff {worst:.2e}")
    check(worst <= TOL, f"the loaded Python module differs from the saved one by {worst:.2e}")


def python_model_recurrent_export():
    """A recurrent Python module on uint8 pixels through export_torchscript (what `mpirl export`
    runs for a model.python run): two steps of the traced file, the state fed back and a reset in
    the second, against the module evaluated by hand on obs / 255."""
    from mpirl_policy.export import export_torchscript
    from mpirl_policy.python_model import PythonModelPolicy

    class Leaky(torch.nn.Module):
        state_size = 3

        def __init__(self):
            super().__init__()
            self.f = torch.nn.Linear(18, 3)
            self.head = torch.nn.Linear(3, 4)

        def step(self, o, i, s):
            s = (1 - i).unsqueeze(-1) * 0.5 * s + torch.tanh(self.f(o.flatten(1)))
            return self.head(s), s[..., 0], s

        def unroll(self, o, i, s):
            ds, vs = [], []
            for t in range(o.shape[0]):
                d, v, s = self.step(o[t], i[t], s)
                ds.append(d)
                vs.append(v)
            return torch.stack(ds), torch.stack(vs)

    spec = {"obs_shape": [2, 3, 3], "obs_uint8": True, "discrete": True, "num_actions": 4, "action_dim": 0,
            "action_low": [], "action_high": [], "id": "test", "max_episode_steps": 0}
    torch.manual_seed(4)
    module = Leaky()
    policy = PythonModelPolicy(module, spec, {"model": {}}).eval()
    out = os.path.join(tempfile.mkdtemp(), "leaky.ts")
    export_torchscript(policy, out, "{}")
    ts = torch.jit.load(out)
    g = torch.Generator().manual_seed(5)
    obs = [torch.randint(0, 256, (3, 2, 3, 3), generator=g, dtype=torch.uint8) for _ in range(2)]
    inits = [torch.zeros(3), torch.tensor([0.0, 1.0, 0.0])]
    got_s = want_s = torch.randn(3, 3, generator=g)
    worst = 0.0
    with torch.no_grad():
        for o, i in zip(obs, inits):
            got_d, got_v, got_s = ts(o, i, got_s)
            want_s = (1 - i).unsqueeze(-1) * 0.5 * want_s + torch.tanh(module.f(o.float().flatten(1) / 255))
            worst = max(worst, diff(got_d, module.head(want_s)), diff(got_v, want_s[:, 0]), diff(got_s, want_s))
        # mpirl_policy's own unroll of the same two steps (the module's unroll, mapped the same way).
        state0 = got_s.new_zeros(3, 3)
        ts_steps, s = [], state0
        for o, i in zip(obs, inits):
            d, _, s = ts(o, i, s)
            ts_steps.append(d)
        un_d, _, _ = policy.unroll(torch.stack(obs), torch.stack(inits), state0)
        worst = max(worst, diff(un_d, torch.stack(ts_steps)))
    print(f"recurrent uint8 Python module, exported, 2 steps with a reset (and unroll): max abs diff {worst:.2e}")
    check(worst <= TOL, f"the exported recurrent Python module differs from it by hand by {worst:.2e}")
    shutil.rmtree(os.path.dirname(out))


def case_export_cli():
    python_model_weights()
    python_model_recurrent_export()
    root, _ = dump(ARGS.workdir)
    d = os.path.join(root, "mlp-lru-box")
    ts = os.path.join(root, "lru.ts")
    r = mpirl_export(d, ts)
    check(r.returncode == 0 and os.path.exists(ts), "mpirl export (torchscript) failed")
    run_clean([(ts, os.path.join(d, "io.pt"), os.path.join(root, "lru_out.pt"))])
    io, got = load(os.path.join(d, "io.pt")), load(os.path.join(root, "lru_out.pt"))
    worst = max(diff(v, io[k]) for k, v in got.items())
    print(f"exported mlp-lru-box vs C++: max abs diff {worst:.2e}")
    check(worst <= TOL, f"the exported policy differs from the C++ one by {worst:.2e}")
    # A model file (config.toml and policy.json beside it) as `mpirl eval` takes it.
    r = mpirl_export(os.path.join(d, "model.pt"), os.path.join(root, "file.ts"))
    check(r.returncode == 0 and os.path.exists(os.path.join(root, "file.ts")), "export of a model file failed")
    # A run without policy.json: the env (CartPole-v1, from its config) gives the spaces.
    old = os.path.join(root, "cartpole-mingru-discrete")
    os.remove(os.path.join(old, "policy.json"))
    r = mpirl_export(old, os.path.join(root, "old.ts"))
    check(r.returncode == 0 and "no policy.json" in r.stderr, "export of a run without policy.json failed")
    run_clean([(os.path.join(root, "old.ts"), os.path.join(old, "io.pt"), os.path.join(root, "old_out.pt"))])
    io, got = load(os.path.join(old, "io.pt")), load(os.path.join(root, "old_out.pt"))
    check(max(diff(v, io[k]) for k, v in got.items()) <= TOL, "the rebuilt-spec export differs from the C++ policy")
    # ONNX: written and checked when onnx is installed; otherwise a one-line error naming the package.
    onnx_out = os.path.join(root, "ff.onnx")
    r = mpirl_export(os.path.join(root, "nature_cnn-none-discrete"), onnx_out, "--format", "onnx")
    if importlib.util.find_spec("onnx") is None:
        check(r.returncode == 2 and "pip install onnx" in r.stderr, "a missing onnx package is not reported")
    else:
        check(r.returncode == 0 and os.path.exists(onnx_out), "mpirl export --format onnx failed")
    r = mpirl_export(os.path.join(root, "no-such-run"), os.path.join(root, "x.ts"))
    check(r.returncode == 2 and "no such file" in r.stderr, "a bad run directory is not reported")
    shutil.rmtree(root)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--mpirl", required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case", choices=["parity", "twins", "export_cli"])
    ARGS = ap.parse_args()
    sys.path.insert(0, os.path.abspath(ARGS.python_dir))
    os.makedirs(ARGS.workdir, exist_ok=True)
    {"parity": case_parity, "twins": case_twins, "export_cli": case_export_cli}[ARGS.case]()
    print(f"{ARGS.case}: OK")


if __name__ == "__main__":
    main()
