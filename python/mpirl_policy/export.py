"""python -m mpirl_policy.export RUN_DIR --out FILE [--format torchscript|onnx] [--spec FILE] [--model FILE]

Writes a run's policy as a file that needs no mpirl code (what ``mpirl export`` runs):
  torchscript  ``m = torch.jit.load(FILE)``. Feed-forward policies: ``dist, value = m(obs)``.
               Recurrent ones: ``dist, value, state = m(obs, is_init, state)`` (one step, state
               from ``m.initial_state(B)``), and ``m.unroll(obs_TB, is_init_TB, state0)``. Both
               have ``m.actions(dist, greedy)``; policy.json rides along as an extra file
               (``torch.jit.load(FILE, _extra_files={"policy.json": ""})``).
  onnx         the same forward (inputs obs[, is_init, state]; outputs dist, value[, state_out]),
               batch dimension dynamic; needs ``pip install onnx`` (and onnxruntime to check it).
dist is the logits [B, L], or a box policy's mean ++ log_std [B, 2A]; value is [B].

A run with ``model.python = "file.py:factory"`` is exported from its module, built by the factory
(the file found as the run found it: relative to the current directory) with model.pt's weights
and the run's observation and value mappings (python_model.py). Its TorchScript file is the traced
step, ``forward`` only (no ``unroll``, ``initial_state`` or ``actions``: the state starts as zeros
[B, state_size]); its ONNX file is the same step.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import warnings
from typing import Tuple

import torch
from torch import nn

from .load import load_policy, read_config
from .policy import Policy
from .python_model import PythonModelPolicy


class FeedForwardExport(nn.Module):
    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.policy(obs)

    @torch.jit.export
    def actions(self, dist: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        return self.policy.actions(dist, greedy)


class RecurrentExport(nn.Module):
    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs: torch.Tensor, is_init: torch.Tensor,
                state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.policy.step(obs, is_init, state)

    @torch.jit.export
    def initial_state(self, batch: int) -> torch.Tensor:
        return self.policy.initial_state(batch)

    @torch.jit.export
    def unroll(self, obs: torch.Tensor, is_init: torch.Tensor,
               state0: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.policy.unroll(obs, is_init, state0)

    @torch.jit.export
    def actions(self, dist: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        return self.policy.actions(dist, greedy)


def wrap(policy: Policy) -> nn.Module:
    if isinstance(policy, PythonModelPolicy):  # its forward is already the step
        return policy
    return (RecurrentExport(policy) if policy.recurrent else FeedForwardExport(policy)).eval()


def example_inputs(policy: Policy, batch: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    shape = [batch] + policy.obs_shape
    if policy.spec.obs_uint8:
        obs = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    else:
        obs = torch.randn(shape, generator=g)
    if not policy.recurrent:
        return (obs,)
    is_init = torch.tensor([1.0] + [0.0] * (batch - 1))
    return obs, is_init, torch.randn([batch, policy.state_size], generator=g)


def max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) if x.numel() else 0.0 for x, y in zip(a, b))


def export_torchscript(policy: Policy, out: str, spec_text: str) -> float:
    """Scripts and saves the policy; returns the largest difference between the reloaded file and
    the eager policy on example inputs."""
    if isinstance(policy, PythonModelPolicy):  # TorchScript compiles no arbitrary module: its step, traced
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scripted = torch.jit.trace(policy, example_inputs(policy), check_trace=False)
    else:
        scripted = torch.jit.script(wrap(policy))
    scripted.save(out, _extra_files={"policy.json": spec_text})
    loaded = torch.jit.load(out)
    args = example_inputs(policy, batch=5, seed=1)  # another batch size than the example's
    with torch.no_grad():
        return max_diff(loaded(*args), wrap(policy)(*args))


@contextlib.contextmanager
def quiet_fds():
    """File descriptors 1 and 2 to /dev/null for the block: the ONNX exporter's C++ side prints
    there (on a failure, its whole graph; the failure itself is the exception's message)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [devnull]:
            os.close(fd)


def export_onnx(policy: Policy, out: str) -> str:
    """Writes the ONNX file (one file, batch dimension dynamic); returns a line on how it was
    checked. The torch.export-based exporter when onnxscript is installed, else the TorchScript-based
    one (needs only onnx)."""
    if importlib.util.find_spec("onnx") is None:
        raise RuntimeError("ONNX export needs the onnx package: pip install onnx (and onnxruntime to run the file)")
    names = ["obs", "is_init", "state"] if policy.recurrent else ["obs"]
    outputs = ["dist", "value", "state_out"] if policy.recurrent else ["dist", "value"]
    args = example_inputs(policy)
    model = wrap(policy)
    # The exporters' deprecation and progress chatter, and the graph they print on a failure: the
    # file is checked below, and a failure is the exception's message.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()), quiet_fds():
        warnings.simplefilter("ignore")
        if importlib.util.find_spec("onnxscript") is not None:
            batch = torch.export.Dim("batch")
            torch.onnx.export(model, args, out, input_names=names, output_names=outputs, dynamo=True,
                              external_data=False, dynamic_shapes={n: {0: batch} for n in names}, verbose=False)
        else:
            torch.onnx.export(model, args, out, input_names=names, output_names=outputs, dynamo=False,
                              dynamic_axes={n: {0: "batch"} for n in names + outputs}, opset_version=17)
    import onnx

    onnx.checker.check_model(onnx.load(out))
    if importlib.util.find_spec("onnxruntime") is None:
        return "onnx.checker passed (pip install onnxruntime to compare outputs)"
    import onnxruntime

    sess = onnxruntime.InferenceSession(out, providers=["CPUExecutionProvider"])
    check = example_inputs(policy, batch=5, seed=1)  # another batch size than the export's
    got = sess.run(outputs, {n: a.numpy() for n, a in zip(names, check)})
    with torch.no_grad():
        want = model(*check)
    return f"onnxruntime vs PyTorch (batch 5): max abs diff {max_diff([torch.as_tensor(g) for g in got], want):.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mpirl_policy.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run or checkpoint directory (config.toml, model.pt, policy.json)")
    ap.add_argument("--out", required=True, help="the file to write")
    ap.add_argument("--format", choices=["torchscript", "onnx"], default="torchscript")
    ap.add_argument("--spec", help="policy.json to use instead of RUN_DIR/policy.json")
    ap.add_argument("--model", help="weights to use instead of RUN_DIR/model.pt")
    a = ap.parse_args(argv)
    config = {}
    try:
        config_path = os.path.join(a.run_dir, "config.toml")
        config = read_config(config_path) if os.path.exists(config_path) else {}
        policy = load_policy(a.run_dir, model=a.model, spec=a.spec)  # a model.python run's module too
        with open(a.spec or os.path.join(a.run_dir, "policy.json")) as f:
            spec_text = f.read()
        kind = "recurrent (forward = one step)" if policy.recurrent else "feed-forward"
        if a.format == "torchscript":
            diff = export_torchscript(policy, a.out, spec_text)
            check = f"reloaded vs eager: max abs diff {diff:.3g}"
        else:
            check = export_onnx(policy, a.out)
    except Exception as e:  # one line, as the C++ commands report errors
        msg = str(e).strip()
        if a.format == "onnx" and config.get("model", {}).get("python") and "not supported" in msg:
            msg += " (model.python's step uses it; --format torchscript traces any PyTorch op)"
        print(f"mpirl export: {msg}", file=sys.stderr)
        return 2
    spec = json.loads(spec_text)
    model = (f"model.python {policy.path_factory}" if isinstance(policy, PythonModelPolicy)
             else f"encoder {policy.encoder_kind}, core {policy.options.core}")
    print(f"{a.out}: {a.format}, {kind} policy, {model}, "
          f"obs {spec['env']['obs_dtype']}{policy.obs_shape}, {spec['env']['action']['type']} actions; {check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
