"""models::Policy in plain PyTorch: encoder -> optional recurrent core -> distribution and value heads.

Outputs are the C++ ones (models/policy_model.h, PolicyOutput): ``dist`` is the logits [..., L] of a
discrete policy, or a box policy's Gaussian mean and state-independent log-std concatenated
[..., 2A]; ``value`` is [...] in return units. uint8 observations are pixels, scaled by 1/255 on
the way in; float32 observations go in as they are, or, with ``model.obs_norm``, as
``clamp((obs - obs_shift) * obs_scale, -obs_norm_clip, obs_norm_clip)`` with the running statistics
the learners published (buffers ``obs_shift``/``obs_scale``). The value head's output is mapped to
return units by ``value_scale * v + value_shift`` (PopArt's statistics; 1 and 0 without it).
"""
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
from torch import nn

from .cores import make_core, state_size
from .encoders import ImpalaCnn, MinAtarCnn, MlpTorso, NatureCnn, resolve_encoder

Out = Tuple[torch.Tensor, torch.Tensor]
StateOut = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass
class EnvSpec:
    """The env's spaces as policy.json records them (envs::EnvSpec)."""
    obs_shape: List[int]
    obs_uint8: bool = False
    discrete: bool = True
    num_actions: int = 0
    action_dim: int = 0
    action_low: List[float] = field(default_factory=list)
    action_high: List[float] = field(default_factory=list)
    id: str = ""


@dataclass
class ModelOptions:
    """The [model] section of config.toml (models::ModelOptions) and the core's fixed FFM context."""
    encoder: str = "auto"
    hidden: List[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    core: str = "none"
    core_size: int = 128
    core_state: int = 64
    ffm_context: int = 4
    obs_norm: bool = False
    obs_norm_clip: float = 10.0
    critic: str = "shared"  # or "separate": the value's own MLP over the observations (C++ critic0, ...)


class Policy(nn.Module):
    """forward(obs) for feed-forward policies; step/unroll (and initial_state) for any policy.

    Shapes: forward obs [..., obs...]; step obs [B, obs...], is_init [B], state [B, S];
    unroll obs [T, B, obs...], is_init [T, B], state0 [B, S]. step and unroll also return the state
    after their last step ([B, S]; [B, 0] for feed-forward policies).
    """

    def __init__(self, spec: EnvSpec, opts: ModelOptions):
        super().__init__()
        if opts.activation not in ("tanh", "relu"):
            raise ValueError(f"model.activation = {opts.activation!r}: expected tanh or relu")
        self.spec, self.options = spec, opts
        self.obs_shape: List[int] = [int(d) for d in spec.obs_shape]
        self.obs_rank = len(self.obs_shape)
        self.discrete = bool(spec.discrete)
        self.encoder_kind = resolve_encoder(opts.encoder, self.obs_shape)
        if self.encoder_kind == "nature_cnn":
            self.encoder = NatureCnn(self.obs_shape)
        elif self.encoder_kind == "impala_cnn":
            self.encoder = ImpalaCnn(self.obs_shape)
        elif self.encoder_kind == "minatar_cnn":
            self.encoder = MinAtarCnn(self.obs_shape)
        else:
            obs_size = 1
            for d in self.obs_shape:
                obs_size *= d
            self.encoder = MlpTorso(obs_size, list(opts.hidden), opts.activation == "relu", self.obs_rank)
        features = self.encoder.out_size
        self.core = make_core(opts.core, features, opts.core_size, opts.core_state, opts.ffm_context)
        self.state_size = state_size(opts.core, opts.core_size, opts.core_state, opts.ffm_context)
        self.recurrent = self.core is not None
        out = opts.core_size if self.core is not None else features
        self.action_size = int(spec.num_actions if spec.discrete else spec.action_dim)
        self.pi = nn.Linear(out, self.action_size)
        self.separate_critic = opts.critic == "separate"
        if self.separate_critic:
            if self.encoder_kind != "mlp" or self.core is not None:
                raise ValueError('model.critic = "separate" needs the mlp encoder without a core')
            critic_in = 1
            for d in self.obs_shape:
                critic_in *= d
            self.critic = MlpTorso(critic_in, list(opts.hidden), opts.activation == "relu", self.obs_rank)
            self.v = nn.Linear(self.critic.out_size, 1)
        else:
            self.critic = None
            self.v = nn.Linear(out, 1)
        if spec.discrete:
            self.register_parameter("log_std", None)
        else:
            self.log_std = nn.Parameter(torch.full([self.action_size], -0.5))
        obs_size = 1
        for d in self.obs_shape:
            obs_size *= d
        norm = obs_size if opts.obs_norm and not spec.obs_uint8 else 0  # pixels are scaled, not normalised
        self.obs_norm_clip = float(opts.obs_norm_clip)
        self.register_buffer("obs_shift", torch.zeros([norm]))
        self.register_buffer("obs_scale", torch.ones([norm]))
        self.register_buffer("value_shift", torch.zeros([1]))
        self.register_buffer("value_scale", torch.ones([1]))

    # ---- the C++ PolicyImpl, method for method ----
    def encoder_input(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32) * (1.0 / 255) if obs.dtype == torch.uint8 else obs
        if self.obs_shift.numel() > 0 and obs.dtype != torch.uint8:
            flat = x.reshape([-1, self.obs_shift.size(0)])
            x = ((flat - self.obs_shift) * self.obs_scale).clamp(-self.obs_norm_clip, self.obs_norm_clip).reshape(x.shape)
        return x

    def torso(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.encoder_input(obs)
        shape: List[int] = list(x.shape)
        lead = shape[: len(shape) - self.obs_rank]
        h = self.encoder(x.reshape([-1] + self.obs_shape))  # [N, obs...] -> [N, features]
        return h.reshape(lead + [h.size(-1)])

    def heads(self, h: torch.Tensor, obs: torch.Tensor) -> Out:
        head = self.pi(h)
        log_std = self.log_std
        if log_std is not None:
            head = torch.cat([head, log_std.expand_as(head)], -1)
        vh = h
        critic = self.critic
        if critic is not None:
            vh = critic(self.encoder_input(obs))
        return head, torch.addcmul(self.value_shift, self.v(vh).squeeze(-1), self.value_scale)

    def forward(self, obs: torch.Tensor) -> Out:
        if self.core is not None:
            raise RuntimeError("Policy.forward is for feed-forward policies; "
                               "use step() or unroll() with a recurrent core")
        return self.heads(self.torso(obs), obs)

    @torch.jit.export
    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros([batch, self.state_size], dtype=torch.float32, device=self.pi.weight.device)

    @torch.jit.export
    def step(self, obs: torch.Tensor, is_init: torch.Tensor, state: torch.Tensor) -> StateOut:
        h = self.torso(obs)
        core = self.core
        if core is not None:
            h, state = core.step(h, state, is_init)
        dist, value = self.heads(h, obs)
        return dist, value, state

    @torch.jit.export
    def unroll(self, obs: torch.Tensor, is_init: torch.Tensor, state0: torch.Tensor) -> StateOut:
        h = self.torso(obs)
        state = state0
        core = self.core
        if core is not None:
            h, state = core.sequence(h, state0, is_init)
        dist, value = self.heads(h, obs)
        return dist, value, state

    @torch.jit.export
    def actions(self, dist: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """Actions from ``dist`` as the actors draw them (models/acting.cpp): discrete, int64 [...]
        (Gumbel-max sample, or the argmax when greedy); box, float32 [..., A] (mean + exp(log_std) *
        N(0, 1), or the mean when greedy), not clipped (the env clips them into its bounds)."""
        if self.discrete:
            if greedy:
                return dist.argmax(-1)
            u = torch.empty_like(dist).uniform_(1e-10, 1.0)
            return (dist - torch.log(-torch.log(u))).argmax(-1)
        mean, log_std = dist.chunk(2, -1)
        if greedy:
            return mean
        return mean + torch.exp(log_std) * torch.randn_like(mean)

    # ---- conveniences (eager Python only) ----
    @torch.jit.ignore
    def act(self, obs, state: Optional[torch.Tensor] = None, is_init=None, greedy: bool = False):
        """One step for a batch: ``obs`` [B, obs...] (a tensor or a numpy array; uint8 or float32).
        Returns ``(actions, state)``; pass the state back in on the next call (recurrent policies;
        None starts from initial_state(B)) with ``is_init`` [B] = 1 where an episode begins (None:
        no resets). Feed-forward policies return state None."""
        obs = torch.as_tensor(obs, device=self.pi.weight.device)
        if obs.dtype != torch.uint8:
            obs = obs.to(torch.float32)  # e.g. float64 numpy observations
        with torch.no_grad():
            if self.core is None:
                dist, _ = self.forward(obs)
                return self.actions(dist, greedy), None
            batch = obs.size(0)
            if state is None:
                state = self.initial_state(batch)
            init = torch.zeros(batch) if is_init is None else torch.as_tensor(is_init, dtype=torch.float32)
            dist, _, state = self.step(obs, init.to(obs.device), state)
            return self.actions(dist, greedy), state

    @torch.jit.ignore
    def split_dist(self, dist: torch.Tensor):
        """(logits, None) for a discrete policy, (mean, log_std) for a box policy."""
        return (dist, None) if self.discrete else tuple(dist.chunk(2, -1))


def cpp_name(name: str) -> str:
    """This module's parameter name as the C++ Policy registers it (encoder.layers.i -> torso{i})."""
    for prefix, cpp in (("encoder.layers.", "torso"), ("critic.layers.", "critic")):
        if name.startswith(prefix):
            i, rest = name[len(prefix):].split(".", 1)
            return f"{cpp}{i}.{rest}"
    return name
