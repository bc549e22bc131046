"""Attention over entities (torch): variable-length observations and POCA's group critic.

A variable-length observation is what Unity's BufferSensor sends: an observation spec of shape
(max_entities, entity_size) whose dimension properties include ``VARIABLE_SIZE``; each row is one
entity, and rows that are all (nearly) zero are padding. As ML-Agents' ObservationEncoder does
(torch_entities/attention.py, networks.py), ml_arl encodes such observations with:

- an ``entity embedding`` per variable-length observation: a dense layer and Swish over each
  entity, ``ATTENTION_EMBEDDING_SIZE`` wide. When the behavior has fixed-size observations too
  (vectors, images), their encodings go through a "self" dense layer and Swish (also that wide)
  and are put in front of every entity, so each entity is seen from the agent's point of view;
- one ``EntityAttention`` (ML-Agents' ResidualSelfAttention) over the entities of every
  variable-length observation together: a parameter-free layer norm, multi-head self-attention
  (``ATTENTION_HEADS`` heads, scores scaled by the square root of the whole embedding size,
  padded entities masked out as keys), a dense layer, the residual, another layer norm, then the
  mean over the entities present (zeros when none is).

The result is appended to the other encodings ([vectors, images, attention]). A row is padding
when the sum of its squares is below ``PADDING_THRESHOLD`` (ML-Agents' test, so a model trained
here reads a build's observations as one trained by ML-Agents does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import torch
from mlagents_envs.base_env import BehaviorSpec, ObservationType
from torch import nn

from ml_arl.core.actor_constants import LAYER_NORM_EPS, MEAN_EPSILON
from ml_arl.core.actor_weights import Dense, EntityEncoderWeights
from ml_arl.core.behavior_specs import is_variable_length
from ml_arl.networks.numpy_weights import dense_weights

ATTENTION_EMBEDDING_SIZE = 128  # ML-Agents' ObservationEncoder: fixed, whatever hidden_units is
ATTENTION_HEADS = 4  # ML-Agents' ResidualSelfAttention and MultiAgentNetworkBody
MASKED_SCORE = -1e6  # ML-Agents' MultiHeadAttention gives masked keys this score
PADDING_THRESHOLD = 0.01  # an entity whose squares sum below this is padding


def variable_indices(spec: BehaviorSpec) -> list[int]:
    return [i for i, o in enumerate(spec.observation_specs) if is_variable_length(o)]


def variable_length_problem(spec: BehaviorSpec, goal_conditioning_type: str = "none") -> Optional[str]:
    """Why this behavior's variable-length observations cannot be encoded (None if they can)."""
    for i, obs in enumerate(spec.observation_specs):
        if is_variable_length(obs) and obs.observation_type == ObservationType.GOAL_SIGNAL and goal_conditioning_type == "hyper":
            return (
                f"observation {i} ({obs.name}) is a variable-length goal signal, which goal conditioning does not take "
                "(nor does ML-Agents); set network_settings.goal_conditioning_type: none"
            )
        if is_variable_length(obs) and len(obs.shape) != 2:
            return (
                f"observation {i} ({obs.name}) is variable-length with shape {tuple(obs.shape)}; "
                "variable-length observations must be (max_entities, entity_size), as a BufferSensor's"
            )
        if is_variable_length(obs) and min(int(s) for s in obs.shape) < 1:
            return f"observation {i} ({obs.name}) is variable-length with an empty shape {tuple(obs.shape)}"
    return None


def small_linear(in_size: int, out_size: int, gain: float, kaiming: bool = False) -> nn.Linear:
    """ML-Agents' linear_layer with a kernel gain: Normal (or Kaiming He normal) init times ``gain``, zero bias."""
    lin = nn.Linear(in_size, out_size)
    with torch.no_grad():
        if kaiming:
            nn.init.kaiming_normal_(lin.weight)
        else:
            nn.init.normal_(lin.weight)
        lin.weight.mul_(gain)
        nn.init.zeros_(lin.bias)
    return lin


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free layer norm over the last dimension (ML-Agents' LayerNorm), written out so
    that it exports to opset 9 as plain ReduceMean, Sub, Mul, Add, Sqrt and Div."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + LAYER_NORM_EPS)


def entities_present(entities: torch.Tensor) -> torch.Tensor:
    """[B, E, size] -> [B, E]: 1.0 for an entity, 0.0 for a padding row (exported as ReduceSum,
    Less and Cast, as ML-Agents' mask)."""
    return 1.0 - ((entities * entities).sum(-1) < PADDING_THRESHOLD).to(entities.dtype)


class EntityAttention(nn.Module):
    """Residual self-attention over entities [B, E, H] with a presence mask [B, E] (bool, or 1.0
    for present and 0.0 for padding) -> [B, H] (ML-Agents' ResidualSelfAttention)."""

    def __init__(self, size: int, heads: int):
        super().__init__()
        if size % heads:
            raise ValueError(f"the attention's size ({size}) must be a multiple of its heads ({heads})")
        self.heads = heads
        gain = math.sqrt(0.125 / size)
        self.query, self.key, self.value, self.out = (small_linear(size, size, gain) for _ in range(4))

    def forward(self, x: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        e, h = int(x.shape[1]), int(x.shape[2])  # constants in an exported graph (the batch stays dynamic)
        x = layer_norm(x)

        def split(t: torch.Tensor) -> torch.Tensor:  # [B, E, H] -> [B, heads, E, H / heads]
            return t.reshape(-1, e, self.heads, h // self.heads).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(2, 3) / math.sqrt(h)  # ML-Agents scales by the embedding size
        # masked keys score MASKED_SCORE, written as arithmetic (Mul, Add) as ML-Agents does for Unity's runtimes
        keep = present.to(scores.dtype).reshape(-1, 1, 1, e)
        scores = scores * keep + (1.0 - keep) * MASKED_SCORE
        attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(-1, e, h)
        out = layer_norm(self.out(attended) + x)
        weights = present.to(out.dtype).reshape(-1, e, 1)
        return (out * weights).sum(1) / (weights.sum(1) + MEAN_EPSILON)

    def weights(self) -> tuple[Dense, Dense, Dense, Dense]:
        return (dense_weights(self.query), dense_weights(self.key), dense_weights(self.value), dense_weights(self.out))



class EntityEncoder(nn.Module):
    """The variable-length observations of a behavior (``indices``, each [B, max_entities,
    entity_size]) and the encoding of its other observations ([B, self_size], or None when it
    has none) -> [B, ATTENTION_EMBEDDING_SIZE]. See the module's docstring."""

    def __init__(self, spec: BehaviorSpec, indices: Sequence[int], self_size: int):
        super().__init__()
        size = ATTENTION_EMBEDDING_SIZE
        gain = math.sqrt(0.125 / size)
        self.indices = list(indices)
        self.self_encoder = nn.Sequential(small_linear(self_size, size, gain), nn.SiLU()) if self_size else None
        context = size if self_size else 0
        self.embeddings = nn.ModuleList(
            nn.Sequential(small_linear(context + int(spec.observation_specs[i].shape[1]), size, gain), nn.SiLU())
            for i in self.indices
        )
        self.attention = EntityAttention(size, ATTENTION_HEADS)
        self.out_size = size

    def forward(self, own: Optional[torch.Tensor], obs: Sequence[torch.Tensor]) -> torch.Tensor:
        entities = [obs[i] for i in self.indices]
        present = torch.cat([entities_present(x) for x in entities], dim=1)
        context = self.self_encoder(own) if self.self_encoder is not None and own is not None else None
        embedded = []
        for x, embed in zip(entities, self.embeddings):
            if context is not None:
                # the agent's own encoding in front of each entity ([B, E, size + entity_size])
                # (copies joined rather than expand(): older Unity runtimes lack Expand, as ML-Agents notes)
                x = torch.cat([torch.cat([context.unsqueeze(1)] * int(x.shape[1]), dim=1), x], dim=2)
            embedded.append(embed(x))
        joined = embedded[0] if len(embedded) == 1 else torch.cat(embedded, dim=1)
        return self.attention(joined, present)  # type: ignore[no-any-return]

    def weights(self) -> EntityEncoderWeights:
        own = self.self_encoder[0] if self.self_encoder is not None else None
        assert own is None or isinstance(own, nn.Linear)
        embeddings = []
        for embed in self.embeddings:
            assert isinstance(embed, nn.Sequential) and isinstance(embed[0], nn.Linear)
            embeddings.append(dense_weights(embed[0]))
        query, key, value, out = self.attention.weights()
        return EntityEncoderWeights(
            indices=tuple(self.indices),
            self_encoder=dense_weights(own) if own is not None else None,
            embeddings=tuple(embeddings),
            query=query, key=key, value=value, out=out,
            heads=self.attention.heads,
            padding_threshold=PADDING_THRESHOLD,
        )


__all__ = [
    "ATTENTION_EMBEDDING_SIZE", "ATTENTION_HEADS", "EntityAttention", "EntityEncoder", "entities_present",
    "is_variable_length", "layer_norm", "small_linear", "variable_indices", "variable_length_problem",
]
