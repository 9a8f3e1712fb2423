"""The recurrent cores of models/cores_rnn.cpp and models/cores_scan.cpp, in plain PyTorch.

Every core maps ``step(x [B, D], state [B, S], is_init [B]) -> (y [B, H], state')`` and
``sequence(x [T, B, D], state0 [B, S], is_init [T, B]) -> (y [T, B, H], state_T)``; ``is_init = 1``
zeroes the state before ``x`` is read. The linear-recurrent cores (lru, ssm, mingru, ffm) are
``h_t = a_t * h_{t-1} + u_t`` with ``a_t = lambda_t * (1 - is_init_t)``; sequence mode runs that as
a plain loop over time (the C++ runs it as one scan: same recurrence). Complex states are kept as
real and imaginary parts (TorchScript- and ONNX-friendly) and travel, as in C++, interleaved:
``state = [re_0, im_0, re_1, im_1, ...]``. Parameter names are the C++ ones (``core.nu_log``, ...).
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

Pair = Tuple[torch.Tensor, torch.Tensor]


def _keep(is_init: torch.Tensor) -> torch.Tensor:
    return (1 - is_init.to(torch.float32)).unsqueeze(-1)


def _split(state: torch.Tensor) -> Pair:  # [B, 2N] interleaved -> re, im [B, N]
    s = state.reshape(state.size(0), -1, 2)
    return s[..., 0], s[..., 1]


def _merge(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:  # re, im [B, N] -> [B, 2N]
    return torch.stack([re, im], -1).reshape(re.size(0), -1)


def state_size(kind: str, hidden: int, state: int, ffm_context: int = 4) -> int:
    """Floats of state per batch element (models::core_state_size)."""
    sizes = {"none": 0, "gru": hidden, "mingru": hidden, "lstm": 2 * hidden, "lru": 2 * state,
             "ssm": 2 * state, "ffm": 2 * state * ffm_context}
    if kind not in sizes:
        raise ValueError(f"unknown recurrent core {kind!r} (expected one of {sorted(sizes)})")
    return sizes[kind]


class GruCore(nn.Module):
    def __init__(self, input: int, hidden: int):
        super().__init__()
        self.state_size = hidden
        self.cell = nn.GRUCell(input, hidden)

    def step(self, x: torch.Tensor, state: torch.Tensor, is_init: torch.Tensor) -> Pair:
        h = self.cell(x, state * _keep(is_init))
        return h, h

    def sequence(self, x: torch.Tensor, state0: torch.Tensor, is_init: torch.Tensor) -> Pair:
        ys: List[torch.Tensor] = []
        h = state0
        for t in range(x.size(0)):
            h = self.step(x[t], h, is_init[t])[1]
            ys.append(h)
        return torch.stack(ys), h


class LstmCore(nn.Module):
    """state = h ++ c."""

    def __init__(self, input: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.state_size = 2 * hidden
        self.cell = nn.LSTMCell(input, hidden)

    def step(self, x: torch.Tensor, state: torch.Tensor, is_init: torch.Tensor) -> Pair:
        s = state * _keep(is_init)
        h, c = self.cell(x, (s[:, : self.hidden], s[:, self.hidden :]))
        return h, torch.cat([h, c], 1)

    def sequence(self, x: torch.Tensor, state0: torch.Tensor, is_init: torch.Tensor) -> Pair:
        ys: List[torch.Tensor] = []
        s = state0
        for t in range(x.size(0)):
            y, s = self.step(x[t], s, is_init[t])
            ys.append(y)
        return torch.stack(ys), s


class MinGruCore(nn.Module):
    """z = sigmoid(W_z x), h_t = (1 - z_t) h_{t-1} + z_t W_h x_t; y = h (a real recurrence)."""

    def __init__(self, input: int, hidden: int):
        super().__init__()
        self.state_size = hidden
        self.z = nn.Linear(input, hidden)
        self.h = nn.Linear(input, hidden)

    def step(self, x: torch.Tensor, state: torch.Tensor, is_init: torch.Tensor) -> Pair:
        z = torch.sigmoid(self.z(x))
        h = (1 - z) * _keep(is_init) * state + z * self.h(x)
        return h, h

    def sequence(self, x: torch.Tensor, state0: torch.Tensor, is_init: torch.Tensor) -> Pair:
        z = torch.sigmoid(self.z(x))
        a = (1 - z) * _keep(is_init)
        u = z * self.h(x)
        ys: List[torch.Tensor] = []
        h = state0
        for t in range(x.size(0)):
            h = a[t] * h + u[t]
            ys.append(h)
        return torch.stack(ys), h


class _ComplexRecurrence(nn.Module):
    """A diagonal complex recurrence h_t = lambda_t (1 - is_init_t) h_{t-1} + u_t; subclasses give
    ``drive(x) -> (lambda_re, lambda_im, u_re, u_im)`` (lambda broadcastable to u) and
    ``readout(h_re, h_im, x)``."""

    def step(self, x: torch.Tensor, state: torch.Tensor, is_init: torch.Tensor) -> Pair:
        lr, li, ur, ui = self.drive(x)
        k = _keep(is_init)
        ar, ai = lr * k, li * k
        hr, hi = _split(state)
        hr, hi = ar * hr - ai * hi + ur, ar * hi + ai * hr + ui
        return self.readout(hr, hi, x), _merge(hr, hi)

    def sequence(self, x: torch.Tensor, state0: torch.Tensor, is_init: torch.Tensor) -> Pair:
        lr, li, ur, ui = self.drive(x)
        k = _keep(is_init)
        ar, ai = (lr * k).expand_as(ur), (li * k).expand_as(ur)
        hr, hi = _split(state0)
        res: List[torch.Tensor] = []
        ims: List[torch.Tensor] = []
        for t in range(x.size(0)):
            hr, hi = ar[t] * hr - ai[t] * hi + ur[t], ar[t] * hi + ai[t] * hr + ui[t]
            res.append(hr)
            ims.append(hi)
        return self.readout(torch.stack(res), torch.stack(ims), x), _merge(hr, hi)


class _DiagonalComplexCore(_ComplexRecurrence):
    """LRU and SSM: u = (B x) * gain(lambda) with B = b_re + i b_im [N, D]; y = GELU(Re(C h) + W x)."""

    def __init__(self, input: int, hidden: int, state: int):
        super().__init__()
        self.state_size = 2 * state
        self.b_re = nn.Parameter(torch.zeros(state, input))
        self.b_im = nn.Parameter(torch.zeros(state, input))
        self.c_re = nn.Parameter(torch.zeros(hidden, state))
        self.c_im = nn.Parameter(torch.zeros(hidden, state))
        self.skip = nn.Linear(input, hidden)

    def readout(self, hr: torch.Tensor, hi: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.matmul(hr, self.c_re.t()) - torch.matmul(hi, self.c_im.t()) + self.skip(x))


class LruCore(_DiagonalComplexCore):
    """lambda = exp(-exp(nu_log) + i exp(theta_log)); gain = exp(gamma_log) (real)."""

    def __init__(self, input: int, hidden: int, state: int):
        super().__init__(input, hidden, state)
        self.nu_log = nn.Parameter(torch.zeros(state))
        self.theta_log = nn.Parameter(torch.zeros(state))
        self.gamma_log = nn.Parameter(torch.zeros(state))

    def drive(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mod, phase = torch.exp(-torch.exp(self.nu_log)), torch.exp(self.theta_log)
        g = torch.exp(self.gamma_log)
        return (mod * torch.cos(phase), mod * torch.sin(phase), torch.matmul(x, self.b_re.t()) * g,
                torch.matmul(x, self.b_im.t()) * g)


class SsmCore(_DiagonalComplexCore):
    """Continuous Lambda = -exp(log_neg_re) + i im, dt = exp(log_dt), lambda = exp(Lambda dt)
    (zero-order hold), gain = (lambda - 1) / Lambda (complex)."""

    def __init__(self, input: int, hidden: int, state: int):
        super().__init__(input, hidden, state)
        self.log_neg_re = nn.Parameter(torch.zeros(state))
        self.im = nn.Parameter(torch.zeros(state))
        self.log_dt = nn.Parameter(torch.zeros(state))

    def drive(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        cr, ci = -torch.exp(self.log_neg_re), self.im
        dt = torch.exp(self.log_dt)
        mod, phase = torch.exp(cr * dt), ci * dt
        lr, li = mod * torch.cos(phase), mod * torch.sin(phase)
        den = cr * cr + ci * ci  # (lambda - 1) / Lambda
        gr, gi = ((lr - 1) * cr + li * ci) / den, (li * cr - (lr - 1) * ci) / den
        xr, xi = torch.matmul(x, self.b_re.t()), torch.matmul(x, self.b_im.t())
        return lr, li, xr * gr - xi * gi, xr * gi + xi * gr


class FfmCore(_ComplexRecurrence):
    """FFM: m gated input traces u = pre(x) * sigmoid(gate_in(x)), each aggregated at c frequencies,
    gamma_jk = exp(-|alpha_j| + i omega_k) (channel j * c + k); y = LN(mix([Re h, Im h])) * g +
    skip(x) * (1 - g), g = sigmoid(gate_out(x))."""

    def __init__(self, input: int, hidden: int, memory: int, context: int = 4):
        super().__init__()
        self.memory, self.context = memory, context
        self.state_size = 2 * memory * context
        self.alpha = nn.Parameter(torch.zeros(memory))
        self.omega = nn.Parameter(torch.zeros(context))
        self.pre = nn.Linear(input, memory)
        self.gate_in = nn.Linear(input, memory)
        self.gate_out = nn.Linear(input, hidden)
        self.mix = nn.Linear(2 * memory * context, hidden)
        self.skip = nn.Linear(input, hidden)
        self.norm = nn.LayerNorm([hidden])

    def drive(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mod = torch.exp(-self.alpha.abs()).unsqueeze(1)  # [M, 1]
        lr = (mod * torch.cos(self.omega).unsqueeze(0)).reshape(-1)
        li = (mod * torch.sin(self.omega).unsqueeze(0)).reshape(-1)
        u = self.pre(x) * torch.sigmoid(self.gate_in(x))  # [..., M]
        shape: List[int] = list(u.shape)
        ur = u.unsqueeze(-1).expand(shape + [self.context]).reshape(shape[:-1] + [self.memory * self.context])
        return lr, li, ur, torch.zeros_like(ur)

    def readout(self, hr: torch.Tensor, hi: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(self.mix(torch.cat([hr, hi], -1)))
        g = torch.sigmoid(self.gate_out(x))
        return z * g + self.skip(x) * (1 - g)


def make_core(kind: str, input: int, hidden: int, state: int, ffm_context: int = 4) -> Optional[nn.Module]:
    """The core models::make_core builds for model.core (None for "none")."""
    if kind == "none":
        return None
    if kind == "gru":
        return GruCore(input, hidden)
    if kind == "lstm":
        return LstmCore(input, hidden)
    if kind == "mingru":
        return MinGruCore(input, hidden)
    if kind == "lru":
        return LruCore(input, hidden, state)
    if kind == "ssm":
        return SsmCore(input, hidden, state)
    if kind == "ffm":
        return FfmCore(input, hidden, state, ffm_context)
    raise ValueError(f"unknown recurrent core {kind!r} (expected none, gru, lstm, lru, ssm, mingru or ffm)")


__all__ = ["make_core", "state_size", "GruCore", "LstmCore", "MinGruCore", "LruCore", "SsmCore", "FfmCore"]
