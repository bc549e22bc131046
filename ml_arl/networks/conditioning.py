"""Goal conditioning (``network_settings.goal_conditioning_type: hyper``), in the layout of
ML-Agents' ConditionalEncoder and HyperNetwork (torch_entities/conditioning.py).

A behavior whose observations include GOAL_SIGNAL ones (mlagents_envs ObservationType) gets, with
``hyper``, a body whose last dense layer has no weights of its own: a small hypernetwork reads the
goal's features and produces that layer's weight matrix, per row of the batch. The earlier dense
layers are the plain body's, and the goal stays part of the body's input too, as in ML-Agents.
With ``none`` (or without goal observations) the goal is just another observation.

The hypernetwork: ``HYPER_LAYERS`` dense layers of ``hidden_units`` with Swish (Kaiming-normal
weights of gain 1, i.e. std 1/sqrt(fan_in), zero biases), a layer normalisation without learnt
scale (eps ``LAYER_NORM_EPS``), then a dense layer to ``in * out`` values, uniform in
+-sqrt(1 / (hidden_units * in)) with a zero bias, read as the [in, out] weights. The conditioned
layer's bias is a plain parameter (zeros at the start). The goal's features are the goal
observations' columns of the observation encoder's output (normalised vectors, image encodings),
so the body needs only that output: ``ConditionalBody(features)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec, ObservationType
from torch import nn

from ml_arl.core.actor_constants import LAYER_NORM_EPS
from ml_arl.core.actor_weights import Dense, HyperLayerWeights
from ml_arl.networks.numpy_weights import np32

HYPER_LAYERS = 2  # the hypernetwork's hidden layers (ML-Agents' HyperNetwork num_layers)


def goal_indices(spec: BehaviorSpec) -> list[int]:
    """The indices of the behavior's GOAL_SIGNAL observations."""
    return [i for i, o in enumerate(spec.observation_specs) if o.observation_type == ObservationType.GOAL_SIGNAL]


def is_conditioned(spec: BehaviorSpec, goal_conditioning_type: str) -> bool:
    """Whether the bodies of this behavior's networks are goal-conditioned by a hypernetwork."""
    return goal_conditioning_type == "hyper" and bool(goal_indices(spec))


def goal_columns(spec: BehaviorSpec, vector: Sequence[int], visual: Sequence[int], image_features: int) -> tuple[int, ...]:
    """The columns of the observation encoder's output that hold the goal observations' features,
    in observation order. The output is [the observations ``vector`` flattened in that order, then
    ``image_features`` per observation of ``visual``]."""
    spans: dict[int, tuple[int, int]] = {}
    start = 0
    for i in vector:
        size = int(np.prod(spec.observation_specs[i].shape))
        spans[i] = (start, start + size)
        start += size
    for i in visual:
        spans[i] = (start, start + image_features)
        start += image_features
    columns: list[int] = []
    for i in goal_indices(spec):
        if i not in spans:
            raise ValueError(f"observation {i} is a goal signal of a kind goal conditioning does not take")
        columns += range(*spans[i])
    return tuple(columns)


def column_runs(columns: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive columns as (start, stop) runs: a slice each (an ONNX Slice, no Gather)."""
    runs: list[tuple[int, int]] = []
    for c in columns:
        if runs and runs[-1][1] == c:
            runs[-1] = (runs[-1][0], c + 1)
        else:
            runs.append((c, c + 1))
    return runs


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """(x - mean) / sqrt(var + eps) over the last dimension, without scale or shift (spelled out:
    opset 9 has no LayerNormalization)."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + LAYER_NORM_EPS)


class HyperLayer(nn.Module):
    """A dense layer [B, in] -> [B, out] whose weights a hypernetwork makes from the goal [B, goal]."""

    def __init__(self, in_size: int, out_size: int, goal_size: int, hidden: int):
        super().__init__()
        self.in_size, self.out_size = in_size, out_size
        self.hidden = nn.ModuleList()
        size = goal_size
        for _ in range(HYPER_LAYERS):
            lin = nn.Linear(size, hidden)
            nn.init.kaiming_normal_(lin.weight, nonlinearity="linear")
            nn.init.zeros_(lin.bias)
            self.hidden.append(lin)
            size = hidden
        self.flat = nn.Linear(hidden, in_size * out_size)
        bound = math.sqrt(1.0 / (hidden * in_size))
        nn.init.uniform_(self.flat.weight, -bound, bound)
        nn.init.zeros_(self.flat.bias)
        self.bias = nn.Parameter(torch.zeros(out_size))

    def layer_weights(self, goal: torch.Tensor) -> torch.Tensor:
        """The generated weights [B, in, out]."""
        g = goal
        for lin in self.hidden:
            g = nn.functional.silu(lin(g))
        return self.flat(layer_norm(g)).reshape(-1, self.in_size, self.out_size)

    def forward(self, x: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        # [B, 1, in] @ [B, in, out]: a batched MatMul (opset 9 has it)
        return torch.matmul(x.unsqueeze(1), self.layer_weights(goal)).squeeze(1) + self.bias


class ConditionalBody(nn.Module):
    """features [B, F] -> the plain layers -> the hyper layer (weights from the goal's columns of the
    features) -> activation -> [B, hidden]."""

    def __init__(self, plain: nn.Sequential, in_size: int, hidden: int, columns: Sequence[int], activation: nn.Module):
        super().__init__()
        self.plain = plain
        self.columns = tuple(columns)
        self.runs = column_runs(self.columns)
        plain_out = [m for m in plain if isinstance(m, nn.Linear)]
        self.hyper = HyperLayer(plain_out[-1].out_features if plain_out else in_size, hidden, len(self.columns), hidden)
        self.activation = activation

    def goal(self, features: torch.Tensor) -> torch.Tensor:
        parts = [features[:, a:b] for a, b in self.runs]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.activation(self.hyper(self.plain(features), self.goal(features)))  # type: ignore[no-any-return]

    def weights(self) -> HyperLayerWeights:
        hyper = self.hyper
        hidden = tuple(Dense(np32(lin.weight.T), np32(lin.bias)) for lin in hyper.hidden if isinstance(lin, nn.Linear))
        flat = Dense(np32(hyper.flat.weight.T), np32(hyper.flat.bias))
        return HyperLayerWeights(hidden, flat, np32(hyper.bias), hyper.in_size, self.columns)
