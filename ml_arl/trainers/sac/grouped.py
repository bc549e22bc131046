"""SAC with ``--num-learners`` (ml_arl.trainers.learner_group).

The replay buffer stays in one place, rank 0: every learner would otherwise need its own copy of
the experience, or a shard of it that a restart or ``--resume`` would have to rebuild per learner.
At an update rank 0 draws the minibatches of every gradient step due, as one learner draws them
(the same random draws), and sends each learner its rows of each (batch_size / N), with its
networks' and optimizers' state. Every learner then takes the gradient steps over its rows,
all-reducing the gradients of the actor, both Q networks, V and the entropy coefficients after
each backward pass; the target network follows V by the same soft update everywhere. The reward signals' steps due
(curiosity, RND, GAIL) follow, each learner on its rows of each signal minibatch rank 0 drew, with
their gradients all-reduced and their normalisers taking in every learner's rows. Rank 0 keeps
the replay buffer, its checkpoints and ``save_replay_buffer`` as with one learner.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ml_arl.trainers.learner_collectives import all_gather, seed_learner
from ml_arl.trainers.learner_group import all_reduce_mean, load_states, spec_of, states_of
from ml_arl.trainers.learner_protocol import ReplayShardMessage
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals import LearnerSync, SignalBatch
from ml_arl.trainers.sac.replay_buffer import ReplayBatch
from ml_arl.trainers.tensor_batches import from_numpy, select_rows, to_numpy

SACTrainer = Any  # ml_arl.trainers.sac.trainer.SACTrainer, which imports this module


def _state(trainer: SACTrainer) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]:
    signals, signal_optimizers = trainer.streams.group_state()
    modules = {"network": trainer.network, "value": trainer.value_net, "target": trainer.target_net,
               "q1": trainer.q1, "q2": trainer.q2, **signals}
    optimizers = {"policy": trainer.policy_optimizer, "value": trainer.value_optimizer, "entropy": trainer.entropy_optimizer,
                  **signal_optimizers}
    return modules, optimizers


def steps_due(trainer: SACTrainer) -> int:
    """How many gradient steps ``update`` takes now (``_updates_due`` until it is False)."""
    hp, done = trainer.hp, 0
    while (trainer.step - hp.buffer_init_steps) / (trainer.update_steps + done) > hp.steps_per_update:
        done += 1
    return done


def group_update(trainer: SACTrainer, signal_stats: dict[str, list[float]]) -> list[torch.Tensor]:
    """Rank 0's part: draw the due minibatches (the gradient steps', then the reward signals'),
    scatter the other learners' rows, take the steps over its own rows; each gradient step's stats
    (rank 0's rows), the signals' loss tags appended to ``signal_stats``."""
    group = trainer.learners
    assert group is not None
    world = group.world
    batches = [trainer._sample() for _ in range(steps_due(trainer))]
    signal_batches = trainer.signal_batches_due()
    if not batches and not signal_batches:
        return []

    def rows(batch: Any, r: int) -> Any:
        per = len(batch) // world
        return select_rows(batch, slice(r * per, (r + 1) * per))

    modules, optimizers = states_of(*_state(trainer))
    modules["alphas"] = {k: v.cpu().numpy() for k, v in trainer.alphas.state().items()}
    learner = spec_of(trainer.behavior, trainer.settings, trainer.spec)
    seed = int(np.random.SeedSequence([trainer.seed, trainer.update_steps, trainer.signal_update_steps]).generate_state(1)[0])
    messages = [
        ReplayShardMessage(learner, [to_numpy(rows(b, r)) for b in batches], trainer.policy_optimizer.lr, modules, optimizers,
                           [to_numpy(rows(b, r)) for b in signal_batches], seed)
        for r in range(1, world)
    ]
    mine, my_signals = [rows(b, 0) for b in batches], [rows(b, 0) for b in signal_batches]
    stats: list[torch.Tensor] = []
    sync = LearnerSync(group.reduce, group.gather)

    def descend() -> None:
        for batch in mine:
            stats.append(trainer._gradient_step(batch, reduce=group.reduce, sync=sync))
            trainer.update_steps += 1
        for signal_batch in my_signals:
            for tag, number in trainer.streams.update(signal_batch, sync).items():
                signal_stats[tag].append(number)
            trainer.signal_update_steps += 1

    group.update(messages, descend)
    return stats


def descend_shard(trainer: SACTrainer, message: ReplayShardMessage, rank: int, world: int) -> None:
    """A learner's part: rank 0's state, then one gradient step per minibatch of its rows."""
    modules, optimizers = _state(trainer)
    load_states(modules, optimizers, message.modules, message.optimizers, trainer.device)
    trainer.alphas.load_state({k: torch.as_tensor(v) for k, v in message.modules["alphas"].items()})
    for name in ("policy", "value", "entropy"):  # (the signals' optimizers keep their own learning rates)
        optimizers[name].lr = message.learning_rate
    seed_learner(message.seed, rank)
    def reduce(params: list[torch.Tensor]) -> None:
        all_reduce_mean(params, world)

    sync = LearnerSync(reduce, lambda x: all_gather(x, world))
    for rows in message.batches:
        batch: ReplayBatch = from_numpy(ReplayBatch, rows, trainer.device)
        trainer._gradient_step(batch, reduce=reduce, sync=sync)
    for rows in message.signal_batches:
        trainer.streams.update(from_numpy(SignalBatch, rows, trainer.device), sync)
