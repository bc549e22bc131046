"""What every reward signal shares: the batch it reads (``SignalBatch``), the provider interface
(``RewardProvider``), the extrinsic signal, and the layers the learned signals are built from.

The learned signals' layers are initialised as ML-Agents initialises its ``NetworkBody`` and
``linear_layer``: hidden layers Kaiming-normal with a linear gain (std = 1/sqrt(fan_in)), output
layers Xavier-uniform, biases zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.core.experience import Trajectory
from ml_arl.networks.encoders import Normalizer, ObservationEncoder
from ml_arl.settings import NetworkSettings, RewardSignalSettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.tensor_batches import map_tensors, select_rows

Index = Union[torch.Tensor, slice]


@dataclass
class SignalBatch:
    """Experience as a reward signal reads it: one row per step."""

    obs: list[torch.Tensor]  # one [N, *shape] float tensor per observation (images HWC)
    next_obs: list[torch.Tensor]  # the observation that followed each step, same layout
    continuous: torch.Tensor  # [N, n_cont] float, as the trainer stores them
    discrete: torch.Tensor  # [N, n_branches] int64
    dones: torch.Tensor  # [N] float 0/1: the episode ended after this step
    rewards: Optional[torch.Tensor] = None  # [N] the environment's reward (the extrinsic signal)

    def __len__(self) -> int:
        return int(self.dones.shape[0])

    def select(self, idx: Index) -> SignalBatch:
        """The rows ``idx`` (indices, a boolean mask or a slice), e.g. a minibatch."""
        return select_rows(self, idx)

    def to(self, device: Union[str, torch.device]) -> SignalBatch:
        return map_tensors(self, lambda t: t.to(device))

    @classmethod
    def from_arrays(
        cls,
        obs: list[np.ndarray],
        continuous: np.ndarray,
        discrete: np.ndarray,
        dones: np.ndarray,
        next_obs: Optional[list[np.ndarray]] = None,
        rewards: Optional[np.ndarray] = None,
    ) -> SignalBatch:
        """A batch from numpy arrays (e.g. demonstrations; actions [N, n_cont] and [N, n_branches]). Without ``next_obs``, each step's next
        observation is the following row inside its episode, and the step's own observation at an
        episode's end or the last row (GAIL and RND never read ``next_obs``)."""
        n = int(np.asarray(dones).shape[0])
        if next_obs is None:
            following = np.minimum(np.arange(n) + 1, max(n - 1, 0))
            ended = np.asarray(dones, dtype=bool) | (np.arange(n) == n - 1)
            rows = np.where(ended, np.arange(n), following)
            next_obs = [np.asarray(o)[rows] for o in obs]
        return cls(
            obs=[torch.as_tensor(np.asarray(o, dtype=np.float32)) for o in obs],
            next_obs=[torch.as_tensor(np.asarray(o, dtype=np.float32)) for o in next_obs],
            continuous=torch.as_tensor(np.asarray(continuous, dtype=np.float32)),
            discrete=torch.as_tensor(np.asarray(discrete, dtype=np.int64)),
            dones=torch.as_tensor(np.asarray(dones, dtype=np.float32)),
            rewards=None if rewards is None else torch.as_tensor(np.asarray(rewards, dtype=np.float32)),
        )

    @classmethod
    def from_trajectory(cls, trajectory: Trajectory) -> SignalBatch:
        """A trajectory's steps: next observations are the following steps' and, for the last,
        the trajectory's ``next_obs``; done only on the last step of an ended episode."""
        dones = np.zeros(len(trajectory), dtype=np.float32)
        dones[-1] = float(trajectory.done)
        next_obs = [np.concatenate([o[1:], np.asarray(last)[None]]) for o, last in zip(trajectory.obs, trajectory.next_obs)]
        return cls.from_arrays(
            trajectory.obs, trajectory.continuous, trajectory.discrete, dones, next_obs, trajectory.rewards
        )


def flatten_actions(continuous: torch.Tensor, discrete: torch.Tensor, branches: tuple[int, ...]) -> torch.Tensor:
    """[continuous, one-hot of each discrete branch] as one float tensor (ML-Agents' ActionFlattener)."""
    parts = [continuous.float()] if continuous.shape[1] else []
    parts += [nn.functional.one_hot(discrete[:, i].long(), b).float() for i, b in enumerate(branches)]
    if not parts:
        return continuous.new_zeros((continuous.shape[0], 0))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def dense(in_size: int, out_size: int, init: Literal["kaiming", "xavier"], gain: float = 1.0) -> nn.Linear:
    """A linear layer initialised as ML-Agents' linear_layer: Kaiming-normal (linear gain) or
    Xavier-uniform weights times ``gain``, zero bias."""
    layer = nn.Linear(in_size, out_size)
    with torch.no_grad():
        if init == "kaiming":
            nn.init.kaiming_normal_(layer.weight, nonlinearity="linear")
        else:
            nn.init.xavier_uniform_(layer.weight)
        layer.weight.mul_(gain)
        nn.init.zeros_(layer.bias)
    return layer


ACTIVATION = {"swish": nn.SiLU, "tanh": nn.Tanh}  # SiLU is ML-Agents' Swish


class StateEmbedding(nn.Module):
    """ML-Agents' NetworkBody without memory: the observations' features (vectors as they are,
    or normalised; images through their encoders), optionally extra inputs appended (GAIL's
    actions and done flag), then ``num_layers`` hidden layers of ``hidden_units``."""

    def __init__(self, spec: BehaviorSpec, settings: NetworkSettings, normalizer: Normalizer, extra_size: int = 0):
        super().__init__()
        self.encoder = ObservationEncoder(spec, settings, normalizer)
        layers: list[nn.Module] = []
        size = self.encoder.out_size + extra_size
        for _ in range(settings.num_layers):
            layers += [dense(size, settings.hidden_units, "kaiming"), ACTIVATION[settings.activation]()]
            size = settings.hidden_units
        self.body = nn.Sequential(*layers)
        self.out_size = size

    def forward(self, obs: list[torch.Tensor], extra: Optional[torch.Tensor] = None) -> torch.Tensor:
        features = self.encoder(obs)
        if extra is not None:
            features = torch.cat([features, extra], dim=1)
        return self.body(features)


@dataclass(frozen=True)
class LearnerSync:
    """How a signal's update agrees with the other learners of a group (``--num-learners``,
    ml_arl.trainers.learner_group): ``gradients`` all-reduces its parameters' gradients (their mean),
    ``gather`` all-gathers one equal-shaped tensor from every learner, in rank order."""

    gradients: Callable[[list[torch.Tensor]], None]
    gather: Callable[[torch.Tensor], list[torch.Tensor]]


def update_normalizer(
    normalizer: Normalizer, embedding: StateEmbedding, obs: list[torch.Tensor], sync: Optional[LearnerSync] = None,
) -> None:
    """Add the batch's vector observations to the running statistics (only when normalising); with
    ``sync``, every learner's batch, in rank order, so the learners' statistics stay equal (and
    equal to one learner's on the batches joined)."""
    if embedding.encoder.normalize and embedding.encoder.vector:
        x = embedding.encoder.vector_part(obs)
        if sync is None:
            normalizer.update(x)
        else:
            for moments in sync.gather(Normalizer.moments(x)):
                normalizer.add_moments(moments)


class RewardProvider(nn.Module):
    """One reward signal. ``evaluate`` gives the reward of each step before ``strength`` (the
    trainer multiplies); ``update`` takes one gradient step of the signal's own Adam optimizer.
    ``state_dict`` holds the networks and the optimizer's state (and loads with weights_only)."""

    name: str = ""  # the key under reward_signals
    display_name: str = ""  # ML-Agents' name in tags: Policy/<display_name> Reward
    ignore_done: bool = False  # True: the signal's value is bootstrapped even at an episode's end

    def __init__(self, settings: RewardSignalSettings):
        super().__init__()
        self.gamma = float(settings.gamma)
        self.strength = float(settings.strength)
        self.optimizer: Optional[Adam] = None
        self.sync: Optional[LearnerSync] = None  # set for the length of a group update (``update``)

    @property
    def reward_tag(self) -> str:
        return f"Policy/{self.display_name} Reward"

    @property
    def value_tag(self) -> str:
        return f"Policy/{self.display_name} Value Estimate"

    def evaluate(self, batch: SignalBatch) -> np.ndarray:
        raise NotImplementedError

    def loss(self, batch: SignalBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss to minimise on ``batch`` and the stats to report (ML-Agents' tags)."""
        raise NotImplementedError(f"the {self.name} signal learns nothing")

    def update(self, batch: SignalBatch, sync: Optional[LearnerSync] = None) -> dict[str, float]:
        """One step on ``batch``; with ``sync`` (a learner of a group, ``batch`` its shard) the
        gradients are averaged over the learners before the step, and normalizers take in every
        learner's batch."""
        if self.optimizer is None:
            return {}
        self.sync = sync
        try:
            loss, stats = self.loss(batch)
        finally:
            self.sync = None
        self.optimizer.zero_grad()
        loss.backward()
        if sync is not None:
            sync.gradients(self.optimizer.params)
        self.optimizer.step()
        return stats

    # nn.Module stores this under "_extra_state" in state_dict() and hands it back on load
    def get_extra_state(self) -> Any:
        return {} if self.optimizer is None else {"optimizer": self.optimizer.state_dict()}

    def set_extra_state(self, state: Any) -> None:
        if self.optimizer is not None:
            if not isinstance(state, dict) or "optimizer" not in state:
                raise ValueError(f"the {self.name} signal's state has no optimizer state")
            self.optimizer.load_state_dict(state["optimizer"])


def to_numpy(rewards: torch.Tensor) -> np.ndarray:
    return rewards.detach().to("cpu", torch.float32).numpy()


class ExtrinsicProvider(RewardProvider):
    """The environment's reward (the behavior's objective), unchanged; nothing to learn."""

    name = "extrinsic"
    display_name = "Extrinsic"

    def evaluate(self, batch: SignalBatch) -> np.ndarray:
        if batch.rewards is None:
            raise ValueError("the extrinsic signal needs the batch's rewards")
        return to_numpy(batch.rewards)
