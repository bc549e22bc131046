"""The PPO loss (ml_arl.trainers.ppo.trainer.ppo_loss) against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from ml_arl.trainers.ppo.trainer import ppo_loss

# Three samples. Ratios exp(log_prob - old_log_prob) = 1.5, 0.5, 1.1; epsilon 0.2:
#   sample 0: advantage  1 -> min(1.5 * 1, 1.2 * 1)   =  1.2  (clipped above)
#   sample 1: advantage -1 -> min(0.5 * -1, 0.8 * -1) = -0.8  (clipped below)
#   sample 2: advantage  2 -> min(1.1 * 2, 1.1 * 2)   =  2.2  (inside the clip range)
# policy loss = -(1.2 - 0.8 + 2.2) / 3 = -0.8666...
# Values: old [0, 1, 2], new [0.5, 0.9, 3.0], returns [1, 0, 2]; clipped new = old + clamp(new - old, +-0.2)
#   = [0.2, 0.9, 2.2]; squared errors unclipped [0.25, 0.81, 1.0], clipped [0.64, 0.81, 0.04];
#   value loss = mean(max) = (0.64 + 0.81 + 1.0) / 3 = 0.81666...; without clipping 2.06 / 3 = 0.68666...
# Entropy [1, 2, 3] (mean 2) with beta 0.01: -0.02.
POLICY = -2.6 / 3
VALUE_CLIPPED = 2.45 / 3
VALUE_PLAIN = 2.06 / 3


def _inputs() -> dict[str, torch.Tensor]:
    return {
        "log_prob": torch.tensor([math.log(1.5), math.log(0.5), math.log(1.1)], dtype=torch.float64, requires_grad=True),
        "old_log_prob": torch.zeros(3, dtype=torch.float64),
        "advantages": torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64),
        "value": torch.tensor([0.5, 0.9, 3.0], dtype=torch.float64, requires_grad=True),
        "old_values": torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64),
        "returns": torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64),
        "entropy": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True),
    }


def test_clipped_surrogate_value_clipping_and_entropy() -> None:
    x = _inputs()
    loss = ppo_loss(**x, epsilon=0.2, beta=0.01, clip_value_loss=True)
    assert loss.policy.item() == pytest.approx(POLICY)
    assert loss.value.item() == pytest.approx(VALUE_CLIPPED)
    assert loss.total.item() == pytest.approx(POLICY + 0.5 * VALUE_CLIPPED - 0.01 * 2.0)
    loss.total.backward()
    # clipped samples carry no policy gradient; sample 2: -(ratio * advantage) / 3
    assert x["log_prob"].grad.tolist() == pytest.approx([0.0, 0.0, -2.2 / 3])
    # value gradient 0.5 * d mean(max(...)): sample 0 takes the clipped branch (constant in the
    # new value), samples 1 and 2 the unclipped one: 0.5 * 2 * (value - return) / 3
    assert x["value"].grad.tolist() == pytest.approx([0.0, 0.9 / 3, 1.0 / 3])
    assert x["entropy"].grad.tolist() == pytest.approx([-0.01 / 3] * 3)


def test_value_loss_without_clipping() -> None:
    loss = ppo_loss(**_inputs(), epsilon=0.2, beta=0.0, clip_value_loss=False)
    assert loss.value.item() == pytest.approx(VALUE_PLAIN)
    assert loss.total.item() == pytest.approx(POLICY + 0.5 * VALUE_PLAIN)


def test_ratio_one_is_the_plain_policy_gradient() -> None:
    """With the acting policy's own log-probabilities (first epoch) the surrogate is the mean advantage."""
    x = _inputs()
    x["log_prob"] = torch.zeros(3, dtype=torch.float64)
    loss = ppo_loss(**x, epsilon=0.2, beta=0.0)
    assert loss.policy.item() == pytest.approx(-(1.0 - 1.0 + 2.0) / 3)


def test_policy_loss_clips_each_action_dimension_on_its_own() -> None:
    """ML-Agents' trust_region_policy_loss: one ratio per continuous dimension (and discrete branch),
    each clipped, averaged over rows and dimensions. Ratios 1.5 and 1/1.5 (a joint ratio of 1) with
    advantage 1: min(1.5, 1.2) and min(0.667, 0.8), mean 0.933 (the joint ratio would give 1)."""
    log_prob = torch.tensor([[math.log(1.5), -math.log(1.5)]])
    zeros = torch.zeros(1, 1)
    loss = ppo_loss(log_prob, torch.zeros(1, 2), torch.ones(1), zeros, zeros, zeros, torch.zeros(1), epsilon=0.2, beta=0.0)
    assert float(loss.policy) == pytest.approx(-(1.2 + 1 / 1.5) / 2)
