"""Everything that crosses a process boundary, as plain typed data (numpy and mlagents_envs
types only; this module never imports torch, so worker processes stay light).

- Experience, from the acting side to the trainers: ``Trajectory`` (cut at time_horizon or at an
  episode's end) and ``EpisodeStat``; a worker's reply to one step request is a ``StepBatch``.
- Policies, from the trainers to the acting side: a trainer publishes a ``PolicySnapshot``
  (version, weights, muscle class); ``ml_arl.run.policies`` turns it into the ``PolicyMessage``
  a behavior acts with (adding the phase's and the behavior's acting settings). Weights of
  ml_arl's own networks are ``ActorWeights``: a dataclass per network layout, so a muscle reads
  fields instead of decoding key names.
- The worker protocol: the main process sends commands (``StepCommand``, ``ResetCommand``,
  ``SetParametersCommand``, ``CloseCommand``); a worker answers with replies (``SpecsReply``,
  ``StepReply``, ``ResetReply``, ``FailedReply``, ``ClosedReply``). Commands and replies are
  separate types, so a reply can never be mistaken for a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, NamedTuple, Optional, Union

import numpy as np
from mlagents_envs.base_env import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps

# --------------------------------------------------------------------------- experience


class Groupmates(NamedTuple):
    """What an agent's groupmates did at each step of its trajectory (ML-Agents' GroupmateStatus),
    for a centralised critic (POCA). Slots are padded to the most groupmates seen in the
    trajectory; ``present[t, m]`` says whether slot m holds a groupmate at step t (padding is 0).
    A groupmate's entry at step t is the observation it acted on and the action it took, in the
    same environment step as the agent's own step t."""

    obs: list[np.ndarray]  # one [T, M, *shape] float32 array per observation
    continuous: np.ndarray  # [T, M, n_cont] raw sampled actions
    discrete: np.ndarray  # [T, M, n_branches] int32
    present: np.ndarray  # [T, M] bool
    next_obs: list[np.ndarray]  # one [M, *shape] array per observation: the groupmates' observations after the last step
    next_present: np.ndarray  # [M] bool
    all_done: bool  # every groupmate of the last step had ended its episode too (ML-Agents' all_group_dones_reached)


class Trajectory(NamedTuple):
    behavior: str
    agent_id: str  # "<worker>-<agent id>"
    obs: list[np.ndarray]  # one [T, *shape] float32 array per observation
    next_obs: list[np.ndarray]  # one [*shape] array per observation: what followed the last step
    continuous: np.ndarray  # [T, n_cont] raw sampled actions
    discrete: np.ndarray  # [T, n_branches] int32
    allowed: Optional[np.ndarray]  # [T, sum(branches)] bool action masks (True = allowed)
    log_prob: np.ndarray  # [T, D] log-probability under the acting policy of each continuous dimension and discrete branch
    rewards: np.ndarray  # [T] the behavior's objective after each action (the environment reward by default)
    group_rewards: np.ndarray  # [T] the agent's group reward received with it (0 without groups)
    group_id: int  # the agent's group (MultiAgentGroup in Unity; 0 = none), as of its last step
    done: bool  # the episode ended with the last step
    interrupted: bool  # ... because of a max-step cut, not a terminal state
    policy_version: int
    env_rewards: Optional[np.ndarray] = None  # [T] the environment reward, when an objective changed it
    groupmates: Optional[Groupmates] = None  # the groupmates' steps, for agents in a group (group_id > 0)
    memories: Optional[np.ndarray] = None  # [T, memory_size] float32: the actor's LSTM memory (h, c) before each step
    # the agent's first trajectory of this episode (an agent starts one when it first acts, after its last
    # episode ended, after an environment reset, in a new or restarted worker): whatever a trainer kept for
    # this agent id from an earlier trajectory (running totals, critic memories) belongs to another episode
    episode_start: bool = False
    # [T] what a user muscle handed its trainer with each step (ActionInfo.extras; palaestrAI's
    # data_for_brain), plain picklable values; None when the muscle hands nothing
    extras: Optional[list[Any]] = None

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.rewards.shape[0])


class EpisodeStat(NamedTuple):
    behavior: str
    reward: float  # return in environment reward
    length: int
    interrupted: bool
    objective: float = 0.0  # return in the behavior's objective
    agent_id: str = ""  # "<worker>-<agent id>"
    final: float = 0.0  # objective + group reward of the last step: who won (self-play ELO)
    group_done: bool = True  # every groupmate ended with it (ML-Agents' all_group_dones_reached; True without a group)


class StepBatch(NamedTuple):
    """What one environment produced for one step request."""

    worker_id: int
    trajectories: list[Trajectory]
    episodes: list[EpisodeStat]
    env_steps: int
    entropy: dict[str, tuple[float, int]]  # behavior -> (sum of entropies, number of decisions)
    new_specs: dict[str, BehaviorSpec]  # behaviors that appeared since the last batch
    env_stats: dict[str, list[tuple[float, EnvStatAggregation]]]  # stats side channel: key -> [(value, how)]


class EnvStatAggregation(IntEnum):
    """How a stats side-channel record is summarised: the values of mlagents_envs'
    StatsAggregationMethod, which the trainer process does not import (it loads the side channels)."""

    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


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
    """An image encoder of ml_arl.policy.networks (network_settings.vis_encode_type), in the
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
    """The variable-length observations' encoder of ml_arl.policy.attention (ML-Agents' entity
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
    """The actor of ml_arl.policy.networks.ActorCritic: observation encoders, an MLP body (then,
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
    Built in one place only: ``ml_arl.run.policies.PolicyRouter``."""

    version: int  # the snapshot's version; negative for a self-play opponent's snapshot
    weights: Any
    time_horizon: int
    deterministic: bool
    collect: bool = True  # build trajectories (False: a frozen behavior or a self-play opponent)
    objective: Optional[tuple[str, dict[str, Any]]] = None  # (name, params); None = the environment reward
    muscle: Optional[str] = None


# --------------------------------------------------------------------------- the worker protocol


@dataclass(frozen=True)
class StepCommand:
    """Step ``steps_per_message`` times; first act with these policies (only the changed ones)
    and hand the environment these parameters, if any (a lesson changed; no reset)."""

    policies: dict[str, PolicyMessage] = field(default_factory=dict)
    parameters: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class ResetCommand:
    """Reset the environment; half-built trajectories are dropped."""


@dataclass(frozen=True)
class SetParametersCommand:
    """New environment parameters (a phase switch, a lesson that requires a reset), applied with a reset."""

    parameters: dict[str, Any]


@dataclass(frozen=True)
class CloseCommand:
    """Close the environment and exit."""


@dataclass(frozen=True)
class ActCommand:
    """Outside actions (ml_arl.vector_env): set these actions, step the environment once, and
    answer with every behavior's steps; with no actions, answer without stepping. A behavior
    with deciding agents and no actions here gets empty ones."""

    actions: dict[str, ActionTuple] = field(default_factory=dict)


WorkerCommand = Union[StepCommand, ResetCommand, SetParametersCommand, CloseCommand, ActCommand]


@dataclass(frozen=True)
class WorkerFailure:
    """Why a worker stopped: an exception in the worker, or its death seen from the main process."""

    exc_type: str
    message: str
    traceback: str
    restartable: bool
    exit_code: int = 1
    user_error: bool = False  # an ArlError: its message is complete, no traceback is shown


@dataclass(frozen=True)
class SpecsReply:
    """The worker's environment started: the behaviors it has."""

    worker_id: int
    specs: dict[str, BehaviorSpec]
    node: str = ""  # where the worker runs, for the log (the Ray backend: node address and id)
    # per behavior, what its trainer needs to know of the environment beyond the spec, pickled by
    # the environment (``behavior_extras()``; torch-free): a palaestrAI agent's sensors and
    # actuators with their spaces, so the main process need not start the environment to learn them
    extras: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class StepReply:
    worker_id: int
    batch: StepBatch


@dataclass(frozen=True)
class ResetReply:
    """A ResetCommand or a SetParametersCommand is done."""

    worker_id: int


@dataclass(frozen=True)
class FailedReply:
    worker_id: int
    failure: WorkerFailure


@dataclass(frozen=True)
class ClosedReply:
    """The worker closed its environment and is about to exit."""

    worker_id: int


@dataclass(frozen=True)
class ObservationReply:
    """An ActCommand is done: each behavior's (DecisionSteps, TerminalSteps), as the env gave them."""

    worker_id: int
    steps: dict[str, tuple[DecisionSteps, TerminalSteps]]


WorkerReply = Union[SpecsReply, StepReply, ResetReply, FailedReply, ClosedReply, ObservationReply]
