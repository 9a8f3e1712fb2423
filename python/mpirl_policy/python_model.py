"""A run trained with ``model.python = "file.py:factory"`` (docs/your-own-model.md), rebuilt for
export: the user's module, built by its factory as the run built it, wrapped in what the C++
policy puts around it (models/policy.cpp, PolicyImpl::py_obs and py_value).

- Observations: uint8 pixels become floats / 255; float observations are normalised with the
  run's ``obs_shift``/``obs_scale`` and clipped to ``model.obs_norm_clip`` when ``model.obs_norm``
  is on (the buffers are empty otherwise).
- Values: ``value_scale * v + value_shift`` (1 and 0 without PopArt; with it, the learner rescales the
  module's ``value_head``).
- Weights: model.pt's ``py.<name>`` tensors are the module's parameters and buffers.

The factory's file is found as the run found it: the path in config.toml, relative to the current
directory when it is not absolute.
"""
import dataclasses
import importlib.util
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from .load import env_spec
from .policy import EnvSpec, Policy


def spec_dict(policy_json: Dict[str, Any]) -> Dict[str, Any]:
    """The ``spec`` the factory gets (models/python_model.cpp, spec_dict), from policy.json's "env"."""
    return dict(dataclasses.asdict(env_spec(policy_json)),
                max_episode_steps=int(policy_json["env"].get("max_episode_steps", 0)))


def options_dict(config: Dict[str, Any]) -> Dict[str, Any]:
    """The ``options`` the factory gets (models/python_model.cpp, options_dict): config.toml's
    [model], with the C++ defaults (core/config.h) for keys it lacks."""
    m = config.get("model", {})
    return {"encoder": m.get("encoder", "auto"), "hidden": [int(h) for h in m.get("hidden", [])],
            "activation": m.get("activation", ""), "core": m.get("core", ""),
            "core_size": int(m.get("core_size", 128)), "core_state": int(m.get("core_state", 64)),
            "obs_norm": bool(m.get("obs_norm", False)), "critic": m.get("critic", "shared"),
            "init": m.get("init", "default"), "log_std_init": float(m.get("log_std_init", -0.5)),
            "python": m.get("python", "")}


def build_module(path_factory: str, spec: Dict[str, Any], options: Dict[str, Any]) -> nn.Module:
    """The user's module from ``file.py:factory``; errors name model.python and what is wrong."""
    path, sep, factory = path_factory.rpartition(":")
    if not sep or not path or not factory:
        raise ValueError(f"model.python = {path_factory!r}: expected \"file.py:factory\"")
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise FileNotFoundError(f"model.python = {path_factory!r}: {full} not found (the path is relative to the "
                                f"directory the run was started in; run the export from there, here "
                                f"{os.getcwd()})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the module's own imports, as in training
    name = "_mpirl_export_" + os.path.splitext(os.path.basename(full))[0]
    mod_spec = importlib.util.spec_from_file_location(name, full)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = mod
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, factory, None)
    if fn is None or not callable(fn):
        raise ValueError(f"model.python = {path_factory!r}: {path} has no function {factory!r}")
    module = fn(spec, options)
    if not isinstance(module, nn.Module):
        raise ValueError(f"model.python = {path_factory!r}: {factory}(spec, options) returned "
                         f"{type(module).__name__}, expected a torch.nn.Module")
    return module


class PythonModelPolicy(nn.Module):
    """The user's module with the C++ policy's observation and value mappings around it.

    ``step(obs [B, obs...], is_init [B], state [B, S]) -> (dist, value, state)``; ``forward`` is one
    step (``forward(obs)`` for a feed-forward module, ``forward(obs, is_init, state)`` for a
    recurrent one), as the built-in exports have it."""

    def __init__(self, module: nn.Module, spec: Dict[str, Any], config: Dict[str, Any]):
        super().__init__()
        self.module = module
        self.spec = EnvSpec(**{k: v for k, v in spec.items() if k != "max_episode_steps"})
        self.obs_shape: List[int] = list(spec["obs_shape"])
        self.obs_uint8 = bool(spec["obs_uint8"])
        self.discrete = bool(self.spec.discrete)
        s = getattr(module, "state_size", 0)
        self.state_size = int((s() if callable(s) else s) or 0)
        self.recurrent = self.state_size > 0
        self.obs_clip = float(config.get("model", {}).get("obs_norm_clip", 10.0))
        self.register_buffer("obs_shift", torch.zeros(0))
        self.register_buffer("obs_scale", torch.ones(0))
        self.register_buffer("value_shift", torch.zeros(1))
        self.register_buffer("value_scale", torch.ones(1))
        self.path_factory = str(config.get("model", {}).get("python", ""))
        self.encoder_kind = "python"

    def load_weights(self, weights: Dict[str, torch.Tensor]) -> None:
        """model.pt's tensors by their C++ names: ``py.<name>`` and the four mapping buffers.

        The C++ side saves ``named_parameters()`` and ``named_buffers()`` (a tied weight once,
        under its first name; non-persistent buffers too), so the same two lists are matched
        here, not ``state_dict()`` (which repeats tied weights and leaves non-persistent buffers
        out)."""
        want = {"py." + k: v for k, v in list(self.module.named_parameters())
                + list(self.module.named_buffers())}
        missing = sorted(set(want) - set(weights))
        unexpected = sorted(k for k in set(weights) - set(want)
                            if k not in ("obs_shift", "obs_scale", "value_shift", "value_scale"))
        if missing or unexpected:
            raise ValueError(f"model.pt does not fit {self.path_factory}'s module: missing {missing}, "
                             f"unexpected {unexpected}")
        for k, t in want.items():
            if weights[k].shape != t.shape:
                raise ValueError(f"model.pt's {k} is {list(weights[k].shape)}, the module's is {list(t.shape)}")
        with torch.no_grad():
            for k, t in want.items():
                t.copy_(weights[k].to(t.dtype))
        for k in ("obs_shift", "obs_scale", "value_shift", "value_scale"):
            if k in weights:
                setattr(self, k, weights[k].detach().clone().to(torch.float32))

    def obs_in(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.dtype == torch.uint8:
            return obs.to(torch.float32) * (1.0 / 255)
        obs = obs.to(torch.float32)
        if self.obs_shift.numel() == 0:
            return obs
        flat = obs.reshape(-1, self.obs_shift.numel())
        return ((flat - self.obs_shift) * self.obs_scale).clamp(-self.obs_clip, self.obs_clip).view(obs.shape)

    def step(self, obs: torch.Tensor, is_init: torch.Tensor,
             state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dist, value, state = self.module.step(self.obs_in(obs), is_init.to(torch.float32), state)[:3]
        return dist, self.value_scale * value + self.value_shift, state

    def forward(self, obs: torch.Tensor, is_init: torch.Tensor = None, state: torch.Tensor = None):
        if not self.recurrent:
            zero = torch.zeros(obs.shape[0], 0, device=obs.device)
            return self.step(obs, torch.zeros(obs.shape[0], device=obs.device), zero)[:2]
        return self.step(obs, is_init, state)

    def unroll(self, obs: torch.Tensor, is_init: torch.Tensor,
               state0: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, None]:
        """``[T, B, ...]`` sequences through the module's ``unroll``: ``(dist, value, None)``. The
        module's contract returns no final state (the built-in Policy's third output); carry a
        state across calls with ``step``."""
        dist, value = self.module.unroll(self.obs_in(obs), is_init.to(torch.float32), state0)[:2]
        return dist, self.value_scale * value + self.value_shift, None

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=self.value_shift.device)

    def split_dist(self, dist: torch.Tensor):
        """(logits, None) for a discrete policy, (mean, log_std) for a box policy."""
        return (dist, None) if self.discrete else tuple(dist.chunk(2, -1))

    def actions(self, dist: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """Actions from ``dist`` as the actors draw them (the built-in Policy's rule)."""
        return Policy.actions(self, dist, greedy)

    def act(self, obs, state: Optional[torch.Tensor] = None, is_init=None, greedy: bool = False):
        """``(actions, state)`` for a batch of observations, as ``Policy.act`` (state None for a
        feed-forward module; None starts a recurrent one from zeros)."""
        dev = self.value_shift.device  # where load_policy(..., device=) put the module
        obs = torch.as_tensor(obs, device=dev)
        if obs.dtype != torch.uint8:
            obs = obs.to(torch.float32)
        with torch.no_grad():
            batch = obs.size(0)
            if state is None:
                state = self.initial_state(batch)
            init = torch.zeros(batch, device=dev) if is_init is None else \
                torch.as_tensor(is_init, dtype=torch.float32, device=dev)
            dist, _, state = self.step(obs, init, state)
            return self.actions(dist, greedy), (state if self.recurrent else None)


def load_python_policy(config: Dict[str, Any], policy_json: Dict[str, Any],
                       weights: Dict[str, torch.Tensor]) -> PythonModelPolicy:
    spec = spec_dict(policy_json)
    module = build_module(str(config["model"]["python"]), spec, options_dict(config))
    policy = PythonModelPolicy(module, spec, config)
    recorded = policy_json.get("model", {}).get("state_size")  # runs since policy.json records it
    if policy_json.get("model", {}).get("encoder") == "python" and recorded is not None \
            and int(recorded) != policy.state_size:
        raise ValueError(f"{policy.path_factory}'s module has state_size {policy.state_size}, the run's had "
                         f"{recorded} (policy.json): has the file changed since training?")
    policy.load_weights(weights)
    return policy.eval()
