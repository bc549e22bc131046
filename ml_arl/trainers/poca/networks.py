"""POCA's centralised critic (ML-Agents' POCAValueNetwork over a MultiAgentNetworkBody).

The critic sees a group as a set of entities. Each entity's observations go through an
observation encoder (shared by all entities, normalised like the actor's), then through an
entity embedding: one for an observation alone, one for an observation with the action taken.
Residual self-attention over the entities (ML-Agents' ResidualSelfAttention: parameter-free
layer norms, multi-head attention with padded entities masked out, a residual, and the mean
over the entities present) gives one vector; the number of entities present, scaled to [-1, 1]
by the most ever seen, is appended, and an MLP and one value head per reward stream follow.

- ``values(obs, mates_obs, present)``: V of the group, every member observed (no actions).
- ``baselines(obs, mates_obs, mates_actions, present)``: the agent's own observation alone,
  its groupmates' observations with their actions: the counterfactual baseline of MA-POCA.

With ``network_settings.memory`` an LSTM follows the MLP (ML-Agents' MultiAgentNetworkBody with
memory): the value and the baseline run through the same LSTM, each from its own memories, over
sequences (rows ``s * L + j``, from memories [S, memory_size], as the actor's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.networks.attention import ATTENTION_HEADS, EntityAttention
from ml_arl.networks.attention import small_linear as _small_linear
from ml_arl.networks.encoders import Normalizer, ObservationEncoder
from ml_arl.networks.layers import dense_head, make_lstm, run_lstm
from ml_arl.settings import NetworkSettings


def _with_self(present: torch.Tensor) -> torch.Tensor:
    """[B, M] groupmate presence -> [B, 1 + M] with the agent itself first (M may be 0: no group)."""
    return torch.cat([torch.ones(present.shape[0], 1, dtype=torch.bool, device=present.device), present.bool()], dim=1)


class POCACritic(nn.Module):
    def __init__(self, spec: BehaviorSpec, settings: NetworkSettings, normalizer: Normalizer, streams: Sequence[str]):
        super().__init__()
        h = settings.hidden_units
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        self.n_cont = spec.action_spec.continuous_size
        self.encoder = ObservationEncoder(spec, settings, normalizer)
        action_size = self.n_cont + sum(self.branches)
        gain = math.sqrt(0.125 / h)
        self.obs_embedding = nn.Sequential(_small_linear(self.encoder.out_size, h, gain), nn.SiLU())
        self.obs_action_embedding = nn.Sequential(_small_linear(self.encoder.out_size + action_size, h, gain), nn.SiLU())
        self.attention = EntityAttention(h, ATTENTION_HEADS if h % ATTENTION_HEADS == 0 else 1)
        layers: list[nn.Module] = []
        size = h + 1  # the attended group and the scaled number of entities
        for _ in range(settings.num_layers):
            layers += [_small_linear(size, h, gain, kaiming=True), nn.SiLU()]
            size = h
        self.body = nn.Sequential(*layers)
        self.memory_size = settings.memory.memory_size if settings.memory is not None else 0
        self.lstm = make_lstm(h, self.memory_size) if self.memory_size else None
        self.value_head = dense_head(self.memory_size // 2 if self.lstm is not None else h, len(streams), "value", settings.init_scheme())
        self.max_entities: torch.Tensor
        self.register_buffer("max_entities", torch.tensor(1.0))  # the most entities seen (ML-Agents' _current_max_agents)

    def _encode(self, obs: list[torch.Tensor]) -> torch.Tensor:
        """Observations [B, E, *shape] per observation -> [B, E, encoding]."""
        b, e = obs[0].shape[:2]
        if e == 0 or b == 0:  # no groupmate slots (no group in this buffer)
            return obs[0].new_zeros(b, e, self.encoder.out_size)
        flat = [o.reshape(b * e, *o.shape[2:]) for o in obs]
        return self.encoder(flat).reshape(b, e, -1)

    def _flat_actions(self, continuous: torch.Tensor, discrete: torch.Tensor) -> torch.Tensor:
        """[B, E, n_cont] and [B, E, branches] -> [B, E, n_cont + sum(branches)]: one-hot discrete actions."""
        parts = [continuous] if self.n_cont else []
        for i, size in enumerate(self.branches):
            parts.append(nn.functional.one_hot(discrete[..., i].long(), size).to(continuous.dtype))
        return torch.cat(parts, dim=-1)

    def _body(self, entities: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """The MLP's output [B, h] (the LSTM's input with memory)."""
        group = self.attention(entities, present)
        count = present.sum(1, keepdim=True).to(group.dtype)
        most = float(count.max())
        if self.training and most > float(self.max_entities):
            self.max_entities.fill_(most)
        group = torch.cat([group, count * 2.0 / self.max_entities - 1.0], dim=1)
        return self.body(group)

    def head(self, features: torch.Tensor, memories: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """[B, streams] from the MLP's output (with memory: sequences from ``memories`` [S, memory_size]),
        and the memories after each sequence (None without memory)."""
        if self.lstm is None:
            return self.value_head(features), None
        assert memories is not None, "a critic with memory runs over sequences from given memories"
        out, after = run_lstm(self.lstm, features, memories)
        return self.value_head(out), after

    def value_features(self, obs: list[torch.Tensor], mates_obs: list[torch.Tensor], present: torch.Tensor) -> torch.Tensor:
        everyone = [torch.cat([o[:, None], m], dim=1) for o, m in zip(obs, mates_obs)]
        entities = self.obs_embedding(self._encode(everyone))
        mask = _with_self(present)
        return self._body(entities, mask)

    def baseline_features(
        self, obs: list[torch.Tensor], mates_obs: list[torch.Tensor], mates_continuous: torch.Tensor,
        mates_discrete: torch.Tensor, present: torch.Tensor,
    ) -> torch.Tensor:
        own = self.obs_embedding(self._encode([o[:, None] for o in obs]))
        mates = self._encode(mates_obs)
        mates = self.obs_action_embedding(torch.cat([mates, self._flat_actions(mates_continuous, mates_discrete)], dim=-1))
        mask = _with_self(present)
        return self._body(torch.cat([own, mates], dim=1), mask)

    def values(
        self, obs: list[torch.Tensor], mates_obs: list[torch.Tensor], present: torch.Tensor, memories: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[B, streams]: the group's value. ``obs`` [B, *shape] (the agent), ``mates_obs``
        [B, M, *shape], ``present`` [B, M] (which groupmate slots are filled)."""
        return self.head(self.value_features(obs, mates_obs, present), memories)[0]

    def baselines(
        self, obs: list[torch.Tensor], mates_obs: list[torch.Tensor], mates_continuous: torch.Tensor,
        mates_discrete: torch.Tensor, present: torch.Tensor, memories: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[B, streams]: the agent's baseline, its groupmates' actions given, its own not."""
        return self.head(self.baseline_features(obs, mates_obs, mates_continuous, mates_discrete, present), memories)[0]
