"""Rebuilding a run's policy: config.toml's [model] + policy.json's env spaces + model.pt's weights.

model.pt is what the C++ ``torch::save(Policy)`` writes: a TorchScript-style archive holding the
parameters under their registered names, read here with ``torch.jit.load(...).state_dict()``.
policy.json (models/policy_file.h) is written next to it by learner 0; runs from before it existed
can be exported with ``mpirl export`` (which rebuilds the env once to learn its spaces) or given a
spec here.
"""
import json
import os
from typing import Any, Dict, Optional, Union

import torch

from .policy import EnvSpec, ModelOptions, Policy, cpp_name

PathLike = Union[str, os.PathLike]


def read_config(path: PathLike) -> Dict[str, Any]:
    """A run's config.toml, parsed."""
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Pythons
        try:
            import tomli as tomllib
        except ImportError as e:
            raise ImportError("reading config.toml needs Python >= 3.11 or `pip install tomli`") from e
    with open(path, "rb") as f:
        return tomllib.load(f)


def model_options(config: Dict[str, Any]) -> ModelOptions:
    """ModelOptions from a parsed config.toml (missing keys take the C++ defaults)."""
    m = config.get("model", {})
    d = ModelOptions()
    return ModelOptions(encoder=m.get("encoder", d.encoder), hidden=[int(h) for h in m.get("hidden", d.hidden)],
                        activation=m.get("activation", d.activation), core=m.get("core", d.core),
                        core_size=int(m.get("core_size", d.core_size)),
                        core_state=int(m.get("core_state", d.core_state)),
                        obs_norm=bool(m.get("obs_norm", d.obs_norm)),
                        obs_norm_clip=float(m.get("obs_norm_clip", d.obs_norm_clip)),
                        critic=str(m.get("critic", d.critic)))


def env_spec(policy_json: Dict[str, Any]) -> EnvSpec:
    """EnvSpec from policy.json's "env"."""
    if policy_json.get("format") != "mpirl-policy":
        raise ValueError("not an mpirl policy.json (its \"format\" is not \"mpirl-policy\")")
    if int(policy_json.get("version", 0)) > 1:
        raise ValueError(f"policy.json version {policy_json['version']} is newer than this package reads (1)")
    env = policy_json["env"]
    act = env["action"]
    discrete = act["type"] == "discrete"
    return EnvSpec(obs_shape=[int(d) for d in env["obs_shape"]], obs_uint8=env["obs_dtype"] == "uint8",
                   discrete=discrete, num_actions=int(act["n"]) if discrete else 0,
                   action_dim=0 if discrete else int(act["dim"]),
                   action_low=[] if discrete else [float(v) for v in act["low"]],
                   action_high=[] if discrete else [float(v) for v in act["high"]], id=env.get("id", ""))


def read_weights(model_pt: PathLike) -> Dict[str, torch.Tensor]:
    """The parameters of a model.pt written by C++ torch::save(Policy), by their C++ names."""
    module = torch.jit.load(str(model_pt), map_location="cpu")
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def build_policy(config: Dict[str, Any], spec_json: Dict[str, Any],
                 weights: Optional[Dict[str, torch.Tensor]] = None) -> Policy:
    """A Policy for a parsed config.toml and policy.json, loaded with ``weights`` (C++ names) if given."""
    model = spec_json.get("model", {})
    if model.get("encoder") == "python" or config.get("model", {}).get("python"):
        raise ValueError("this run's network is a model.python module, not a built-in policy: "
                         "load it with load_policy(run_dir) (or python_model.load_python_policy)")
    opts = model_options(config)
    opts.ffm_context = int(model.get("ffm_context", opts.ffm_context))
    policy = Policy(env_spec(spec_json), opts)
    for key, ours in (("encoder", policy.encoder_kind), ("state_size", policy.state_size)):
        if key in model and model[key] != ours:
            raise ValueError(f"policy.json says model.{key} = {model[key]!r} but the config builds {ours!r}")
    if weights is not None:
        load_cpp_state_dict(policy, weights)
    return policy.eval()


def load_cpp_state_dict(policy: Policy, weights: Dict[str, torch.Tensor]) -> None:
    """Copies C++-named parameters into ``policy``; every parameter must be there with its shape."""
    ours = {cpp_name(k): k for k in policy.state_dict()}
    missing, unexpected = sorted(set(ours) - set(weights)), sorted(set(weights) - set(ours))
    if missing or unexpected:
        raise ValueError(f"model.pt does not fit the config's policy: missing {missing}, unexpected {unexpected}")
    state = {}
    for cpp, py in ours.items():
        want = policy.state_dict()[py].shape
        if weights[cpp].shape != want:
            raise ValueError(f"model.pt's {cpp} is {list(weights[cpp].shape)}, the config's policy has {list(want)}")
        state[py] = weights[cpp]
    policy.load_state_dict(state, strict=True)


def load_policy(run_dir: PathLike, model: Optional[PathLike] = None, spec: Optional[PathLike] = None,
                device: Union[str, torch.device] = "cpu") -> torch.nn.Module:
    """The policy of a run directory (config.toml, policy.json, model.pt), in eval mode on ``device``.

    ``model``: another weights file of the same run (default RUN_DIR/model.pt); ``spec``: a
    policy.json to use instead of RUN_DIR/policy.json. A run trained with ``model.python`` gives
    a ``PythonModelPolicy``: the module its file's factory builds (the file must still be at the
    path config.toml names), with the run's weights and observation/value mappings.
    """
    config_path = os.path.join(run_dir, "config.toml")
    model_path = model if model is not None else os.path.join(run_dir, "model.pt")
    spec_path = spec if spec is not None else os.path.join(run_dir, "policy.json")
    for p in (config_path, model_path):
        if not os.path.exists(p):
            raise FileNotFoundError(f"{p} not found: is {run_dir} a run directory with a saved model?")
    if not os.path.exists(spec_path):
        raise FileNotFoundError(f"{spec_path} not found (runs from before policy.json was written: "
                                f"`mpirl export {run_dir} --out FILE` rebuilds the env to learn its spaces)")
    with open(spec_path) as f:
        spec_json = json.load(f)
    config = read_config(config_path)
    if config.get("model", {}).get("python"):
        from .python_model import load_python_policy  # it imports this module
        return load_python_policy(config, spec_json, read_weights(model_path)).to(device)
    return build_policy(config, spec_json, read_weights(model_path)).to(device)
