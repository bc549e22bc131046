"""SAC with ``--num-learners`` (ml_arl.trainers.learner_group).

The replay buffer stays in one place, rank 0: every learner would otherwise need its own copy of
the experience, or a shard of it that a restart or ``--resume`` would have to rebuild per learner.
At an update rank 0 draws the minibatches of every gradient step due, as one learner draws them
(the same random draws), and sends each learner its rows of each (batch_size / N), with its
networks' and optimizers' state. Every learner then takes the gradient steps over its rows,
all-reducing the gradients of the actor, both Q networks, V and the entropy coefficients after
each backward pass; the target network follows V by the same soft update everywhere. Rank 0 keeps
the replay buffer, its checkpoints and ``save_replay_buffer`` as with one learner.
"""

from __future__ import annotations

from typing import Any

import torch

from ml_arl.trainers.learner_group import all_reduce_mean, load_states, spec_of, states_of
from ml_arl.trainers.learner_protocol import ReplayShardMessage
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.sac.replay_buffer import ReplayBatch
from ml_arl.trainers.tensor_batches import from_numpy, select_rows, to_numpy

SACTrainer = Any  # ml_arl.trainers.sac.trainer.SACTrainer, which imports this module


def _state(trainer: SACTrainer) -> tuple[dict[str, torch.nn.Module], dict[str, Adam]]:
    modules = {"network": trainer.network, "value": trainer.value_net, "target": trainer.target_net,
               "q1": trainer.q1, "q2": trainer.q2}
    optimizers = {"policy": trainer.policy_optimizer, "value": trainer.value_optimizer, "entropy": trainer.entropy_optimizer}
    return modules, optimizers


def steps_due(trainer: SACTrainer) -> int:
    """How many gradient steps ``update`` takes now (``_updates_due`` until it is False)."""
    hp, done = trainer.hp, 0
    while (trainer.step - hp.buffer_init_steps) / (trainer.update_steps + done) > hp.steps_per_update:
        done += 1
    return done


def group_update(trainer: SACTrainer) -> list[torch.Tensor]:
    """Rank 0's part: draw the due minibatches, scatter the other learners' rows, take the steps
    over its own rows; each step's stats (rank 0's rows)."""
    group = trainer.learners
    assert group is not None
    world = group.world
    batches = [trainer._sample() for _ in range(steps_due(trainer))]
    if not batches:
        return []
    per = len(batches[0]) // world
    modules, optimizers = states_of(*_state(trainer))
    modules["alphas"] = {k: v.cpu().numpy() for k, v in trainer.alphas.state().items()}
    learner = spec_of(trainer.behavior, trainer.settings, trainer.spec)
    messages = [
        ReplayShardMessage(learner, [to_numpy(select_rows(b, slice(r * per, (r + 1) * per))) for b in batches],
                           trainer.policy_optimizer.lr, modules, optimizers)
        for r in range(1, world)
    ]
    mine = [select_rows(b, slice(0, per)) for b in batches]
    stats: list[torch.Tensor] = []

    def descend() -> None:
        for batch in mine:
            stats.append(trainer._gradient_step(batch, reduce=group.reduce))
            trainer.update_steps += 1

    group.update(messages, descend)
    return stats


def descend_shard(trainer: SACTrainer, message: ReplayShardMessage, rank: int, world: int) -> None:
    """A learner's part: rank 0's state, then one gradient step per minibatch of its rows."""
    modules, optimizers = _state(trainer)
    load_states(modules, optimizers, message.modules, message.optimizers, trainer.device)
    trainer.alphas.load_state({k: torch.as_tensor(v) for k, v in message.modules["alphas"].items()})
    for opt in optimizers.values():
        opt.lr = message.learning_rate
    for rows in message.batches:
        batch: ReplayBatch = from_numpy(ReplayBatch, rows, trainer.device)
        trainer._gradient_step(batch, reduce=lambda params: all_reduce_mean(params, world))
