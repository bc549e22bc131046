"""What the learners of one run send each other (ml_arl.trainers.learner_group): typed, numpy-only
messages, scattered from rank 0 (the run's own process) to the other learners over the gloo group.

A ``ShardMessage`` is one update of one brain for one learner: its shard of the buffer's rows
(values, advantages and returns computed by rank 0 over the whole buffer, the advantages
normalised there), the update's hyperparameters at this step, and the state every learner starts
the update from (rank 0's network and optimizer): after any load (``--resume``, ``--initialize-from``,
a phase's ``load:``) the learners agree without a protocol of their own for it. ``StopLearners``
ends a learner's loop. No torch here: this module must import without it.
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
class ShardRows:
    """PPOBatch's fields as numpy, for one learner's rows."""

    obs: list[np.ndarray]
    allowed: Optional[np.ndarray]
    continuous: np.ndarray
    discrete: np.ndarray
    log_prob: np.ndarray
    values: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray


@dataclass(frozen=True)
class ShardMessage:
    learner: LearnerSpec
    rows: ShardRows
    epsilon: float
    beta: float
    learning_rate: float
    minibatch: int  # rows per minibatch on each learner (batch_size // learners)
    seed: int  # each learner draws its minibatch order from (seed, rank)
    network: dict[str, np.ndarray] = field(default_factory=dict)  # rank 0's state_dict before the update
    optimizer: dict[str, list[np.ndarray]] = field(default_factory=dict)  # its Adam moments and step counters


@dataclass(frozen=True)
class StopLearners:
    reason: str = "the run ended"
