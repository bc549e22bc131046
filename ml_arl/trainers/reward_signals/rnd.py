"""Random Network Distillation (Burda et al. 2018) as ML-Agents implements it.

Two networks of the same layout (ML-Agents' NetworkBody from the signal's network_settings): a
target left at its random initialisation and a predictor trained to match it. The reward of a
step is sum((predictor(s) - target(s))^2), the loss its mean over the batch; states seen often
are predicted well and earn little. With ``normalize`` both networks read the vector
observations through one running normalizer that, as in ML-Agents, takes in every batch the
signal sees (evaluated or updated on) after using the statistics from before it.
"""

from __future__ import annotations

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec

from ml_arl.networks.encoders import Normalizer, vector_size
from ml_arl.settings import RNDSettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals.base import (
    RewardProvider,
    SignalBatch,
    StateEmbedding,
    to_numpy,
    update_normalizer,
)


def distillation_error(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per step: the squared distance between the predictor's and the target's features."""
    return ((prediction - target) ** 2).sum(dim=1)


class RNDProvider(RewardProvider):
    name = "rnd"
    display_name = "Rnd"
    ignore_done = True

    def __init__(self, spec: BehaviorSpec, settings: RNDSettings):
        super().__init__(settings)
        network = settings.network_settings
        self.normalizer = Normalizer(vector_size(spec))
        self.target = StateEmbedding(spec, network, self.normalizer)
        self.target.requires_grad_(False)
        self.predictor = StateEmbedding(spec, network, self.normalizer)
        self.optimizer = Adam(self.predictor.parameters(), lr=settings.learning_rate)

    def _errors(self, batch: SignalBatch) -> torch.Tensor:
        with torch.no_grad():
            target = self.target(batch.obs)
        errors = distillation_error(self.predictor(batch.obs), target)
        update_normalizer(self.normalizer, self.target, batch.obs, self.sync)
        return errors

    def loss(self, batch: SignalBatch) -> tuple[torch.Tensor, dict[str, float]]:
        loss = self._errors(batch).mean()
        return loss, {"Losses/RND Loss": loss.item()}

    def evaluate(self, batch: SignalBatch) -> np.ndarray:
        with torch.no_grad():
            return to_numpy(self._errors(batch))
