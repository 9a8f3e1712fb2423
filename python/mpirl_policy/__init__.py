"""mpirl policies in plain PyTorch: rebuild a run's policy from config.toml, policy.json and
model.pt (written by the C++ learner) as a torch.nn.Module, and export it to TorchScript or ONNX.

    from mpirl_policy import load_policy
    policy = load_policy("runs/NAME")                # eval mode, CPU
    actions, state = policy.act(obs, greedy=True)    # obs [B, obs...]; state: recurrent policies
    dist, value = policy(obs)                        # feed-forward: logits, or mean ++ log_std
    dist, value, state = policy.step(obs, is_init, state)           # any policy, one step
    dist, value, state_T = policy.unroll(obs_TB, is_init_TB, state0)  # [T, B, ...] sequences

``python -m mpirl_policy.export RUN_DIR --out FILE [--format torchscript|onnx]`` (or
``mpirl export``) writes a file that needs no mpirl code.
"""
from .load import build_policy, load_cpp_state_dict, load_policy, read_config, read_weights
from .policy import EnvSpec, ModelOptions, Policy

__all__ = ["load_policy", "build_policy", "read_config", "read_weights", "load_cpp_state_dict", "Policy", "EnvSpec",
           "ModelOptions"]
