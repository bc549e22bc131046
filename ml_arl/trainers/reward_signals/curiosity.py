"""Curiosity: ML-Agents' intrinsic curiosity module (Pathak et al. 2017, ICM).

A state encoder maps s and s' to features phi(s), phi(s'). The inverse model predicts the
action from [phi(s), phi(s')]; the forward model predicts phi(s') from [phi(s), action]. The
reward is the forward model's error, 0.5 * sum((phi(s') - predicted)^2); the loss is
10 * (0.2 * forward + 0.8 * inverse). As in ML-Agents:

- the forward loss trains the encoder through both the prediction and its target phi(s');
- the inverse loss is the summed squared error of the continuous actions plus the summed
  cross-entropy (of softmax probabilities, +1e-10 inside the log) over the discrete branches;
- the reward is 0 until the first update and at most 1 / strength (so at most 1 once scaled);
- with ``normalize`` the vector observations go through a normalizer that is never updated,
  which only clamps them to [-5, 5].
ML-Agents also weights the means by its LSTM padding masks; without memory they are all ones.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.networks.encoders import Normalizer, vector_size
from ml_arl.settings import CuriositySettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals.base import (
    LearnerSync,
    RewardProvider,
    SignalBatch,
    StateEmbedding,
    dense,
    flatten_actions,
    to_numpy,
)


def forward_error(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per step: 0.5 * the squared distance between the predicted and the actual next features."""
    return 0.5 * ((target - predicted) ** 2).sum(dim=1)


class CuriosityProvider(RewardProvider):
    name = "curiosity"
    display_name = "Curiosity"
    ignore_done = True

    FORWARD_WEIGHT = 0.2  # ML-Agents' beta: forward vs inverse loss
    LOSS_MULTIPLIER = 10.0
    MODEL_UNITS = 256  # hidden layer of the inverse and forward models
    LOG_EPSILON = 1e-10

    updated: torch.Tensor

    def __init__(self, spec: BehaviorSpec, settings: CuriositySettings):
        super().__init__(settings)
        network = settings.network_settings
        self.n_cont = spec.action_spec.continuous_size
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        h, units = network.hidden_units, self.MODEL_UNITS
        self.normalizer = Normalizer(vector_size(spec))  # never updated (see the module's docstring)
        self.state_encoder = StateEmbedding(spec, network, self.normalizer)
        self.inverse_model = nn.Sequential(dense(2 * h, units, "kaiming"), nn.SiLU())
        self.continuous_prediction = dense(units, self.n_cont, "xavier") if self.n_cont else None
        self.discrete_prediction = dense(units, sum(self.branches), "xavier") if self.branches else None
        action_size = self.n_cont + sum(self.branches)
        self.forward_model = nn.Sequential(dense(h + action_size, units, "kaiming"), nn.SiLU(), dense(units, h, "xavier"))
        self.register_buffer("updated", torch.tensor(False))
        self.optimizer = Adam(self.parameters(), lr=settings.learning_rate)

    def predict_next(self, phi: torch.Tensor, batch: SignalBatch) -> torch.Tensor:
        actions = flatten_actions(batch.continuous, batch.discrete, self.branches)
        return self.forward_model(torch.cat([phi, actions], dim=1))

    def inverse_error(self, phi: torch.Tensor, phi_next: torch.Tensor, batch: SignalBatch) -> torch.Tensor:
        """Mean over steps of the inverse model's error: squared error summed over the continuous
        actions, plus (a separate mean) the cross-entropy summed over the discrete branches."""
        hidden = self.inverse_model(torch.cat([phi, phi_next], dim=1))
        loss = phi.new_zeros(())
        if self.continuous_prediction is not None:
            loss = loss + ((batch.continuous - self.continuous_prediction(hidden)) ** 2).sum(dim=1).mean()
        if self.discrete_prediction is not None:
            logits = torch.split(self.discrete_prediction(hidden), list(self.branches), dim=1)
            cross_entropy = phi.new_zeros(phi.shape[0])
            for i, branch_logits in enumerate(logits):
                probs = torch.softmax(branch_logits, dim=1)
                chosen = probs.gather(1, batch.discrete[:, i : i + 1].long()).squeeze(1)
                cross_entropy = cross_entropy - torch.log(chosen + self.LOG_EPSILON)
            loss = loss + cross_entropy.mean()
        return loss

    def loss(self, batch: SignalBatch) -> tuple[torch.Tensor, dict[str, float]]:
        phi = self.state_encoder(batch.obs)
        phi_next = self.state_encoder(batch.next_obs)
        forward = forward_error(self.predict_next(phi, batch), phi_next).mean()
        inverse = self.inverse_error(phi, phi_next, batch)
        w = self.FORWARD_WEIGHT
        total = self.LOSS_MULTIPLIER * (w * forward + (1.0 - w) * inverse)
        stats = {"Losses/Curiosity Forward Loss": forward.item(), "Losses/Curiosity Inverse Loss": inverse.item()}
        return total, stats

    def update(self, batch: SignalBatch, sync: Optional[LearnerSync] = None) -> dict[str, float]:
        self.updated.fill_(True)
        return super().update(batch, sync)

    def evaluate(self, batch: SignalBatch) -> np.ndarray:
        if not bool(self.updated):
            return np.zeros(len(batch), dtype=np.float32)
        with torch.no_grad():
            phi = self.state_encoder(batch.obs)
            rewards = to_numpy(forward_error(self.predict_next(phi, batch), self.state_encoder(batch.next_obs)))
        # ML-Agents caps the scaled reward at 1 (it would divide by zero at strength 0)
        return np.minimum(rewards, 1.0 / self.strength) if self.strength > 0 else rewards
