"""Policies, from the trainers to the acting side, as plain typed data (numpy only, never torch):
a trainer publishes a ``PolicySnapshot`` (version, weights, muscle class);
``ml_arl.training.router`` turns it into the ``PolicyMessage`` a behavior acts with (adding
the phase's and the behavior's acting settings). Weights of ml_arl's own networks are
``ActorWeights``: a dataclass per network layout, so a muscle reads fields instead of decoding key
names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

# --------------------------------------------------------------------------- weights


@dataclass(frozen=True)
class Dense:
    """y = x @ w + b, with w as [in, out] (transposed from torch's [out, in])."""

    w: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class Conv:
    """A convolution over channels-last images: w is [kh, kw, in, out]; ``padding`` zeros are
    added on each side of the height and the width first (0: a valid convolution)."""

    w: np.ndarray
    b: np.ndarray
    stride: int
    padding: int = 0


@dataclass(frozen=True)
class ResidualBlockWeights:
    """ML-Agents' ResNetBlock: x + conv_b(swish(conv_a(swish(x)))), both 3x3 with padding 1."""

    conv_a: Conv
    conv_b: Conv


@dataclass(frozen=True)
class ResNetStackWeights:
    """One stack of ML-Agents' ResNet encoder: ``conv`` (3x3, padding 1), a max-pool
    (``pool_kernel`` square, ``pool_stride``, no padding), then the residual blocks."""

    conv: Conv
    pool_kernel: int
    pool_stride: int
    blocks: tuple[ResidualBlockWeights, ...]


VisualEncoderKind = Literal["simple", "nature_cnn", "resnet", "match3", "fully_connected"]


@dataclass(frozen=True)
class VisualEncoderWeights:
    """An image encoder of ml_arl.networks.actor_critic (network_settings.vis_encode_type), in the
    layout of ML-Agents' encoder of the same kind:

    - ``simple``, ``nature_cnn``, ``match3``, ``fully_connected``: the ``convs`` (none for
      fully_connected), each followed by LeakyReLU, then ``dense`` and LeakyReLU;
    - ``resnet``: the ``stacks``, then Swish, ``dense`` and ReLU.

    ``dense`` reads the last feature map flattened channels-last (height, width, channels):
    its rows are permuted from torch's (channels, height, width) order."""

    kind: VisualEncoderKind
    dense: Dense
    convs: tuple[Conv, ...] = ()
    stacks: tuple[ResNetStackWeights, ...] = ()


@dataclass(frozen=True)
class LSTMWeights:
    """One LSTM layer (torch's gate order: input, forget, cell, output), as numpy: gates = x @ w_ih +
    h @ w_hh + b. The memory is [h, c] concatenated: memory_size = 2 * hidden."""

    w_ih: np.ndarray  # [in, 4 * hidden]
    w_hh: np.ndarray  # [hidden, 4 * hidden]
    b: np.ndarray  # [4 * hidden]: torch's two biases summed


@dataclass(frozen=True)
class EntityEncoderWeights:
    """The variable-length observations' encoder of ml_arl.networks.attention (ML-Agents' entity
    embeddings and ResidualSelfAttention). For each observation in ``indices`` ([B, E, size]):
    entities [self context, entity] -> ``embeddings[k]`` -> Swish, where the context is Swish(own
    @ ``self_encoder``) of the other observations' encoding (none when ``self_encoder`` is None).
    All entities together: x = layer_norm(embedded); multi-head attention (``heads``) with
    ``query``, ``key``, ``value``, scores over sqrt(width), padding keys masked; y =
    layer_norm(attended @ ``out`` + x); the mean of y over the entities present. An entity is
    padding when the sum of its squares is below ``padding_threshold``."""

    indices: tuple[int, ...]
    self_encoder: Optional[Dense]
    embeddings: tuple[Dense, ...]
    query: Dense
    key: Dense
    value: Dense
    out: Dense
    heads: int
    padding_threshold: float


@dataclass(frozen=True)
class HyperLayerWeights:
    """A goal-conditioned dense layer (network_settings.goal_conditioning_type: hyper): its [in, out]
    weights are made per row from the goal, g = features[:, goal_columns]: for each layer of
    ``hidden`` g = swish(g @ w + b), then g = layer_norm(g) (no scale, eps 1e-5), then
    weights = (g @ flat.w + flat.b).reshape(in_size, out); y = x @ weights + bias."""

    hidden: tuple[Dense, ...]
    flat: Dense  # [hidden, in_size * out]
    bias: np.ndarray  # [out]
    in_size: int
    goal_columns: tuple[int, ...]  # columns of the encoded observations that hold the goal


@dataclass(frozen=True)
class ActorWeights:
    """The actor of ml_arl.networks.actor_critic.ActorCritic: observation encoders, an MLP body (then,
    with network_settings.memory, an LSTM), a Gaussian head (state-independent log std) and one
    categorical head over all discrete branches. Heads of an action kind the behavior lacks have
    zero columns."""

    body: tuple[Dense, ...]
    activation: Literal["swish", "tanh"]
    mu: Dense  # [hidden, n_continuous]
    log_std: np.ndarray  # [n_continuous]
    logits: Dense  # [hidden, sum(branches)]
    branches: tuple[int, ...]
    visual: tuple[int, ...] = ()  # indices of the image observations, each with its encoder
    encoders: tuple[VisualEncoderWeights, ...] = ()
    norm_mean: Optional[np.ndarray] = None  # observation normalisation of the vector part
    norm_std: Optional[np.ndarray] = None
    # SAC's actor (ML-Agents' conditional_sigma and tanh_squash): log std = clamp(hidden @ log_sigma, -20, 2)
    # instead of log_std, and actions tanh(sample), sent to the env as they are
    log_sigma: Optional[Dense] = None
    tanh_squash: bool = False
    # network_settings.memory: an LSTM between the body and the heads (the heads read its output)
    lstm: Optional[LSTMWeights] = None
    # variable-length observations (their indices are in ``entities``): their attention encoding
    # follows the vector and image encodings
    entities: Optional[EntityEncoderWeights] = None
    # goal conditioning: the body's last layer, after the layers of ``body`` (then the activation)
    hyper: Optional[HyperLayerWeights] = None


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class PolicySnapshot:
    """What a trainer publishes after an update. ``weights`` is ``ActorWeights`` for ml_arl's
    networks; a user trainer's muscle class (``muscle``: import path) may take any picklable
    weights of its own."""

    version: int
    weights: Any
    muscle: Optional[str] = None  # import path of the class that acts with the weights; None = ml_arl's Muscle


@dataclass(frozen=True)
class PolicyMessage:
    """What one behavior acts with in the workers; sent again whenever any field changes.
    Built in one place only: ``ml_arl.training.policy_message.policy_message``."""

    version: int  # the snapshot's version; negative for a self-play opponent's snapshot
    weights: Any
    time_horizon: int
    deterministic: bool
    collect: bool = True  # build trajectories (False: a frozen behavior or a self-play opponent)
    objective: Optional[tuple[str, dict[str, Any]]] = None  # (name, params); None = the environment reward
    muscle: Optional[str] = None
