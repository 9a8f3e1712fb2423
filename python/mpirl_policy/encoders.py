"""The encoders of models/encoders.{h,cpp} and the MLP torso of models/policy.cpp, in plain PyTorch.

Submodule and parameter names are the C++ ones (``torso0``, ``encoder.conv0``, ``encoder.res0_1``,
``encoder.fc``), so a ``model.pt`` state dict loads into them as it is.
"""
from typing import List

import torch
import torch.nn.functional as F
from torch import nn


def resolve_encoder(encoder: str, obs_shape: List[int]) -> str:
    """model.encoder for an observation shape, as models::resolve_encoder decides it."""
    image = len(obs_shape) == 3
    if encoder != "auto":
        kind = encoder
    elif not image:
        kind = "mlp"
    else:
        kind = "nature_cnn" if obs_shape[1] >= 36 and obs_shape[2] >= 36 else "impala_cnn"
    if kind not in ("mlp", "nature_cnn", "impala_cnn", "minatar_cnn"):
        raise ValueError(f"model.encoder = {encoder!r}: expected auto, mlp, nature_cnn, impala_cnn or minatar_cnn")
    if kind != "mlp":
        if not image:
            raise ValueError(f"model.encoder = {encoder!r}: expected image observations [C, H, W], got {obs_shape}")
        min_hw = {"nature_cnn": 36, "minatar_cnn": 3}.get(kind, 1)
        if obs_shape[1] < min_hw or obs_shape[2] < min_hw:
            raise ValueError(f"model.encoder = {encoder!r}: observations {obs_shape} are smaller than "
                             f"{min_hw}x{min_hw}")
    return kind


class MlpTorso(nn.Module):
    """Linear layers (C++ ``torso0``, ``torso1``, ...: here ``torso.0``, ``torso.1``, ...) each
    followed by tanh (or ReLU); image observations are flattened first."""

    def __init__(self, in_size: int, hidden: List[int], relu: bool, obs_rank: int):
        super().__init__()
        self.relu = relu
        self.obs_rank = obs_rank
        self.layers = nn.ModuleList()
        for h in hidden:
            self.layers.append(nn.Linear(in_size, h))
            in_size = h
        self.out_size = in_size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = obs.flatten(obs.dim() - self.obs_rank) if self.obs_rank > 1 else obs
        for layer in self.layers:
            h = torch.relu(layer(h)) if self.relu else torch.tanh(layer(h))
        return h


def _flat_size(features, obs_shape: List[int]) -> int:
    with torch.no_grad():
        return features(torch.zeros(1, *obs_shape)).size(1)


class NatureCnn(nn.Module):
    """The DQN Nature network: conv 32 8x8/4, conv 64 4x4/2, conv 64 3x3/1 (ReLU each), flatten,
    linear 512, ReLU. [N, C, H, W] floats -> [N, 512]."""

    def __init__(self, obs_shape: List[int]):
        super().__init__()
        self.conv0 = nn.Conv2d(obs_shape[0], 32, 8, stride=4)
        self.conv1 = nn.Conv2d(32, 64, 4, stride=2)
        self.conv2 = nn.Conv2d(64, 64, 3, stride=1)
        self.out_size = 512
        self.fc = nn.Linear(_flat_size(self.features, obs_shape), self.out_size)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(torch.relu(self.conv1(torch.relu(self.conv0(x)))))).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(self.features(x)))


class ImpalaCnn(nn.Module):
    """The IMPALA paper's residual network: for 16, 32, 32 channels a 3x3 conv (``conv{k}``), a
    3x3/2 max pool and two residual blocks (``res{k}_0..3``: ReLU, conv, ReLU, conv, + input); then
    ReLU, flatten, linear 256, ReLU. [N, C, H, W] floats -> [N, 256]."""

    def __init__(self, obs_shape: List[int]):
        super().__init__()
        c_in = obs_shape[0]
        for k, c in enumerate((16, 32, 32)):
            self.add_module(f"conv{k}", nn.Conv2d(c_in, c, 3, padding=1))
            for r in range(4):
                self.add_module(f"res{k}_{r}", nn.Conv2d(c, c, 3, padding=1))
            c_in = c
        self.out_size = 256
        self.fc = nn.Linear(_flat_size(self.features, obs_shape), self.out_size)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        # (TorchScript takes no module arguments: the three stages are written out.)
        h = F.max_pool2d(self.conv0(x), 3, 2, 1)
        h = h + self.res0_1(torch.relu(self.res0_0(torch.relu(h))))
        h = h + self.res0_3(torch.relu(self.res0_2(torch.relu(h))))
        h = F.max_pool2d(self.conv1(h), 3, 2, 1)
        h = h + self.res1_1(torch.relu(self.res1_0(torch.relu(h))))
        h = h + self.res1_3(torch.relu(self.res1_2(torch.relu(h))))
        h = F.max_pool2d(self.conv2(h), 3, 2, 1)
        h = h + self.res2_1(torch.relu(self.res2_0(torch.relu(h))))
        h = h + self.res2_3(torch.relu(self.res2_2(torch.relu(h))))
        return torch.relu(h).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(self.features(x)))


class MinAtarCnn(nn.Module):
    """The MinAtar paper's DQN network: conv 16 3x3/1 without padding (``conv0``), ReLU, flatten,
    linear 128, ReLU. [N, C, H, W] floats -> [N, 128]."""

    def __init__(self, obs_shape: List[int]):
        super().__init__()
        self.conv0 = nn.Conv2d(obs_shape[0], 16, 3)
        self.out_size = 128
        self.fc = nn.Linear(_flat_size(self.features, obs_shape), self.out_size)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv0(x)).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(self.features(x)))
