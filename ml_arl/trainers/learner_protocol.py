"""What the learners of one run send each other (ml_arl.trainers.learner_group): typed, numpy-only
messages, scattered from rank 0 (the run's own process) to the other learners over the gloo group.

A ``ShardMessage`` is one PPO (or POCA) update of one brain for one learner: its shard of the
buffer's rows (values, advantages and returns computed by rank 0 over the whole buffer, the
advantages normalised there), the update's hyperparameters at this step, and the state every
learner starts the update from (rank 0's networks and optimizers); a ``ReplayShardMessage`` is
SAC's, with the learner's part of every minibatch rank 0 drew for the update (the reward signals' rows
travel with both, when signals learn): after any load (``--resume``, ``--initialize-from``,
a phase's ``load:``) the learners agree without a protocol of their own for it. ``KeepAlive``
keeps a waiting learner's collective inside its timeout, ``StopLearners`` ends a learner's loop. No torch here: this module must import without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


@dataclass(frozen=True)
class LearnerSpec:
    """Enough to build a brain's replica in a learner that has not seen it yet."""

    behavior: str
    settings: dict[str, Any]  # TrainerSettings.model_dump(mode="json")
    spec: Any  # ml_arl.core.behavior_specs.spec_to_plain(spec)


@dataclass(frozen=True)
class ShardMessage:
    """PPO's (and POCA's) update: the learner's rows of the buffer (its batch class's fields as numpy,
    ml_arl.trainers.tensor_batches.to_numpy)."""

    learner: LearnerSpec
    rows: dict[str, Any]
    epsilon: float
    beta: float
    learning_rate: float
    minibatch: int  # rows per minibatch on each learner (batch_size // learners)
    seed: int  # each learner draws its minibatch order from (seed, rank)
    modules: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # rank 0's state_dicts before the update
    optimizers: dict[str, dict[str, list[np.ndarray]]] = field(default_factory=dict)  # their Adam moments and steps
    signal_rows: Optional[dict[str, Any]] = None  # the same rows as the reward signals read them (SignalBatch), if any learn


@dataclass(frozen=True)
class ReplayShardMessage:
    """SAC's update: the gradient steps rank 0 has due, each with this learner's rows of the
    minibatch rank 0 drew from its replay buffer (the buffer stays there)."""

    learner: LearnerSpec
    batches: list[dict[str, Any]]
    learning_rate: float
    modules: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    optimizers: dict[str, dict[str, list[np.ndarray]]] = field(default_factory=dict)
    signal_batches: list[dict[str, Any]] = field(default_factory=list)  # the reward signals' steps due, this learner's rows of each
    seed: int = 0  # each learner seeds its torch generator from (seed, rank)


@dataclass(frozen=True)
class KeepAlive:
    """Sent by rank 0 when it has sent nothing for a while (between updates, in a phase that does not
    train): a learner waiting for its next message would otherwise reach the collective timeout."""


@dataclass(frozen=True)
class StopLearners:
    reason: str = "the run ended"
