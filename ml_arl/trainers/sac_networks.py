"""SAC's critics, as ML-Agents lays them out: a state-value network V (and its slowly moving
target copy) and two Q networks. Each has its own observation encoder and MLP body and one
output per reward stream; a Q network also takes the continuous actions next to the encoded
observations and, with discrete actions, gives a value per discrete action of every branch.
They share the actor's observation normalizer (updated by the trainer)."""

from __future__ import annotations

import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.policy.networks import Normalizer, ObservationEncoder, _head, _mlp
from ml_arl.settings import NetworkSettings


class Critic(nn.Module):
    """obs (+ continuous actions) -> [B, streams, outputs]."""

    def __init__(
        self,
        spec: BehaviorSpec,
        settings: NetworkSettings,
        normalizer: Normalizer,
        streams: int,
        action_inputs: int = 0,
        outputs: int = 1,
    ):
        super().__init__()
        self.streams = streams
        self.outputs = outputs
        self.action_inputs = action_inputs
        self.encoder = ObservationEncoder(spec, settings, normalizer)
        self.body = _mlp(self.encoder.out_size + action_inputs, settings.hidden_units, settings.num_layers, settings.activation)
        self.head = _head(settings.hidden_units, streams * outputs, gain=1.0)

    def forward(self, obs: list[torch.Tensor], actions: torch.Tensor | None = None) -> torch.Tensor:
        x = self.encoder(obs)
        if self.action_inputs:
            assert actions is not None
            x = torch.cat([x, actions], dim=1)
        return self.head(self.body(x)).reshape(-1, self.streams, self.outputs)


def soft_update(source: nn.Module, target: nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, parameter by parameter (ML-Agents' soft_update)."""
    with torch.no_grad():
        for src, tgt in zip(source.parameters(), target.parameters()):
            tgt.mul_(1.0 - tau).add_(src, alpha=tau)
