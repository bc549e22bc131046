"""PPO's and POCA's part of a ``--num-learners`` update (ml_arl.trainers.learner_group): rank 0
splits the buffer's rows into equal shards and sends each learner its own with rank 0's state;
every learner runs the update's epochs over its shard, its minibatches batch_size / N rows in an
order drawn from (a seed rank 0 draws, its rank), all-reducing each minibatch's gradients. The
reward signals that learn (curiosity, RND, GAIL) take their step on the same rows of each
minibatch, their gradients all-reduced too and their normalisers taking in every learner's rows
(RewardProvider.update with a LearnerSync), so every learner's signals stay equal to rank 0's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, Protocol, TypeVar

import numpy as np
import torch

from ml_arl.trainers.learner_collectives import all_gather, seed_learner
from ml_arl.trainers.learner_group import LearnerGroup, all_reduce_mean, load_states, spec_of, states_of
from ml_arl.trainers.learner_protocol import ShardMessage
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals import LearnerSync, SignalBatch
from ml_arl.trainers.tensor_batches import from_numpy, to_numpy

T = TypeVar("T")
Reduce = Callable[[list[torch.Tensor]], None]
# (rows, the signals' rows or None, minibatch, rng, reduce, the signals' sync) -> losses
Descend = Callable[[Any, Optional[SignalBatch], int, np.random.Generator, Reduce, LearnerSync], T]


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


def update_in_group(trainer: GroupedOnPolicy, data: Any, signal_data: Optional[SignalBatch], epsilon: float, beta: float,
                    descend: Descend[T]) -> T:
    """Rank 0's part: N equal shards of ``data``'s rows (and of ``signal_data``'s, the same rows;
    the last n mod N rows sit this update out), one to each other learner with rank 0's state;
    ``descend`` over the first, here."""
    group = trainer.learners
    assert group is not None
    world, device = group.world, trainer.device
    per = len(data) // world
    minibatch = max(min(trainer.hp.batch_size, len(data)) // world, 1)
    seed = int(trainer.rng.integers(2**31))
    modules, optimizers = states_of(*trainer._group_state())
    learner = spec_of(trainer.behavior, trainer.settings, trainer.spec)

    def shard(batch: Any, r: int) -> Any:
        return batch.select(torch.arange(r * per, (r + 1) * per, device=device))

    messages = [
        ShardMessage(learner, to_numpy(shard(data, r)), epsilon, beta, trainer.optimizer.lr, minibatch, seed, modules,
                     optimizers, None if signal_data is None else to_numpy(shard(signal_data, r)))
        for r in range(1, world)
    ]
    mine, my_signals = shard(data, 0), None if signal_data is None else shard(signal_data, 0)
    out: list[T] = []
    rng = np.random.default_rng([seed, 0])
    sync = LearnerSync(group.reduce, group.gather)
    group.update(messages, lambda: out.append(descend(mine, my_signals, minibatch, rng, group.reduce, sync)))
    return out[0]


def descend_shard(trainer: GroupedOnPolicy, message: ShardMessage, rank: int, world: int, batch_class: Callable[..., Any],
                  descend: Callable[[Any, Optional[SignalBatch], float, float, int, np.random.Generator, Reduce, LearnerSync], Any]) -> None:
    """A learner's part: rank 0's state, then ``descend(rows, signal_rows, epsilon, beta, minibatch,
    rng, reduce, sync)`` over its shard."""
    load_states(*trainer._group_state(), message.modules, message.optimizers, trainer.device)
    trainer.optimizer.lr = message.learning_rate
    rows = from_numpy(batch_class, message.rows, trainer.device)
    signal_rows = None if message.signal_rows is None else from_numpy(SignalBatch, message.signal_rows, trainer.device)
    rng = np.random.default_rng([message.seed, rank])
    seed_learner(message.seed, rank)

    def reduce(params: list[torch.Tensor]) -> None:
        all_reduce_mean(params, world)

    sync = LearnerSync(reduce, lambda x: all_gather(x, world))
    descend(rows, signal_rows, message.epsilon, message.beta, message.minibatch, rng, reduce, sync)
