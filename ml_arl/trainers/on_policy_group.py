"""PPO's and POCA's part of a ``--num-learners`` update (ml_arl.trainers.learner_group): rank 0
splits the buffer's rows into equal shards and sends each learner its own with rank 0's state;
every learner runs the update's epochs over its shard, its minibatches batch_size / N rows in an
order drawn from (a seed rank 0 draws, its rank), all-reducing each minibatch's gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from ml_arl.trainers.learner_group import LearnerGroup, all_reduce_mean, load_states, spec_of, states_of
from ml_arl.trainers.learner_protocol import ShardMessage
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.tensor_batches import from_numpy, to_numpy

T = TypeVar("T")
Reduce = Callable[[list[torch.Tensor]], None]
Descend = Callable[[Any, int, np.random.Generator, Reduce], T]  # (rows, minibatch, rng, reduce) -> losses


class GroupedOnPolicy(Protocol):
    behavior: str
    settings: Any
    spec: Any
    hp: Any
    device: torch.device
    rng: np.random.Generator
    optimizer: Adam
    learners: LearnerGroup | None

    def _group_state(self) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]: ...


def update_in_group(trainer: GroupedOnPolicy, data: Any, epsilon: float, beta: float, descend: Descend[T]) -> T:
    """Rank 0's part: N equal shards of ``data``'s rows (the last n mod N rows sit this update
    out), one to each other learner with rank 0's state; ``descend`` over the first, here."""
    group = trainer.learners
    assert group is not None
    world, device = group.world, trainer.device
    per = len(data) // world
    minibatch = max(min(trainer.hp.batch_size, len(data)) // world, 1)
    seed = int(trainer.rng.integers(2**31))
    modules, optimizers = states_of(*trainer._group_state())
    learner = spec_of(trainer.behavior, trainer.settings, trainer.spec)
    messages = [
        ShardMessage(learner, to_numpy(data.select(torch.arange(r * per, (r + 1) * per, device=device))),
                     epsilon, beta, trainer.optimizer.lr, minibatch, seed, modules, optimizers)
        for r in range(1, world)
    ]
    mine = data.select(torch.arange(0, per, device=device))
    out: list[T] = []
    rng = np.random.default_rng([seed, 0])
    group.update(messages, lambda: out.append(descend(mine, minibatch, rng, group.reduce)))
    return out[0]


def descend_shard(trainer: GroupedOnPolicy, message: ShardMessage, rank: int, world: int, batch_class: Callable[..., Any],
                  descend: Callable[[Any, float, float, int, np.random.Generator, Reduce], Any]) -> None:
    """A learner's part: rank 0's state, then ``descend(rows, epsilon, beta, minibatch, rng, reduce)``
    over its shard."""
    load_states(*trainer._group_state(), message.modules, message.optimizers, trainer.device)
    trainer.optimizer.lr = message.learning_rate
    rows = from_numpy(batch_class, message.rows, trainer.device)
    rng = np.random.default_rng([message.seed, rank])
    descend(rows, message.epsilon, message.beta, message.minibatch, rng, lambda params: all_reduce_mean(params, world))
