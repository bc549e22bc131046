"""trainers.batches: one helper takes rows of, or moves, every field of a typed batch."""

from __future__ import annotations

import torch

from ml_arl.trainers.ppo.trainer import PPOBatch
from ml_arl.trainers.reward_signals import SignalBatch


def test_rows_of_every_field_and_estimates_not_computed_yet_stay_empty() -> None:
    batch = PPOBatch(
        obs=[torch.arange(8.0).reshape(4, 2), torch.arange(4.0)], allowed=None,
        continuous=torch.zeros(4, 0), discrete=torch.arange(4).reshape(4, 1), log_prob=torch.arange(4.0).reshape(4, 1),
    )
    mb = batch.select(torch.tensor([3, 1]))
    assert mb.obs[0].tolist() == [[6.0, 7.0], [2.0, 3.0]] and mb.obs[1].tolist() == [3.0, 1.0]
    assert mb.continuous.shape == (2, 0) and mb.discrete.tolist() == [[3], [1]] and mb.allowed is None
    assert mb.values.shape == (0,) and mb.advantages.shape == (0,)  # not computed yet: left as they are
    assert len(mb) == 2 and isinstance(mb, PPOBatch)


def test_signal_batches_select_and_move_every_field() -> None:
    batch = SignalBatch.from_arrays(
        [torch.arange(6.0).reshape(3, 2).numpy()], torch.zeros(3, 1).numpy(), torch.zeros(3, 0, dtype=torch.int64).numpy(),
        torch.tensor([0.0, 0.0, 1.0]).numpy(), [torch.arange(6.0).reshape(3, 2).numpy()], torch.tensor([1.0, 2.0, 3.0]).numpy(),
    )
    mb = batch.select(slice(1, None)).to("cpu")
    assert mb.obs[0].tolist() == [[2.0, 3.0], [4.0, 5.0]] and mb.dones.tolist() == [0.0, 1.0]
    assert mb.rewards is not None and mb.rewards.tolist() == [2.0, 3.0]
