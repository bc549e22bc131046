"""The actor-critic (torch): an observation encoder (``ml_arl.networks.encoders``), an MLP body
(``ml_arl.networks.layers``), a Gaussian head with a state-independent log-std (or SAC's
state-dependent one) and a categorical head per discrete branch (``ml_arl.networks.distributions``),
and a critic with its own encoder and body unless ``shared_critic``. The same maths runs in numpy
inside the workers (``ml_arl.acting.muscle``); ``muscle_weights()`` is the hand-over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.core.actor_constants import LOG_SIGMA_MAX, LOG_SIGMA_MIN, MASK_LOGIT
from ml_arl.core.actor_weights import ActorWeights, Dense, LSTMWeights
from ml_arl.networks.attention import variable_length_problem
from ml_arl.networks.conditioning import ConditionalBody
from ml_arl.networks.distributions import ActionDistribution
from ml_arl.networks.encoders import (
    Normalizer,
    ObservationEncoder,
    ResNetEncoder,
    VisualEncoder,
    check_visual_support,
    vector_size,
)
from ml_arl.networks.layers import dense_head, make_lstm, mlp_body, run_lstm
from ml_arl.networks.numpy_weights import dense_weights, np32
from ml_arl.settings import NetworkSettings


class ActorCritic(nn.Module):
    """The actor (encoder, MLP body, action heads) and a critic with one value head per reward
    stream. PPO uses a state-independent log std; SAC (``conditional_sigma``, ``tanh_squash``)
    a log-sigma head and tanh-squashed actions, as ML-Agents' actors.

    With ``settings.memory`` the actor has an LSTM between the body and the heads (hidden size
    memory_size / 2; a memory is [h, c], memory_size wide, as ML-Agents'). Its inputs are then
    sequences: ``N = S * sequence_length`` rows, row ``s * L + j`` being step j of sequence s,
    with ``memories`` [S, memory_size] the memory before each sequence's first step. The critic has
    an LSTM of its own after its body (the actor's with ``shared_critic``), as ML-Agents'; its
    memories are kept by the trainer."""

    def __init__(
        self,
        spec: BehaviorSpec,
        settings: NetworkSettings,
        shared_critic: bool = False,
        *,
        streams: Sequence[str] = ("extrinsic",),
        conditional_sigma: bool = False,
        tanh_squash: bool = False,
        critic: bool = True,
    ):
        super().__init__()
        problem = variable_length_problem(spec, settings.goal_conditioning_type) or check_visual_support(spec, settings)
        if problem is not None:
            raise ValueError(problem)
        self.spec = spec
        self.n_cont = spec.action_spec.continuous_size
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        self.normalize = settings.normalize
        self.normalizer = Normalizer(vector_size(spec))
        h = self.hidden_units = settings.hidden_units
        self.activation = settings.activation
        self.streams = tuple(streams)
        self.tanh_squash = tanh_squash
        self.encoder = ObservationEncoder(spec, settings, self.normalizer)
        self.in_size = self.encoder.out_size
        self.body = mlp_body(spec, settings, self.encoder)
        self.memory_size = settings.memory.memory_size if settings.memory is not None else 0
        self.lstm = make_lstm(h, self.memory_size) if self.memory_size else None
        head_in = self.memory_size // 2 if self.memory_size else h
        self.shared_critic = shared_critic
        # SAC (critic=False) keeps its value and Q networks apart (ml_arl.trainers.sac.networks)
        self.critic_encoder = self.encoder if shared_critic or not critic else ObservationEncoder(spec, settings, self.normalizer)
        self.critic_body = self.body if shared_critic or not critic else mlp_body(spec, settings, self.critic_encoder)
        # Heads exist only for the action kinds the behavior has (no zero-sized layers).
        scheme = settings.init_scheme()
        self.mu = dense_head(head_in, self.n_cont, "mu", scheme) if self.n_cont else None
        self.log_std: nn.Parameter = nn.Parameter(torch.full((self.n_cont,), float(settings.log_std_init)))
        self.log_sigma = dense_head(head_in, self.n_cont, "log_sigma", scheme) if self.n_cont and conditional_sigma else None
        if self.log_sigma is not None:
            nn.init.constant_(self.log_sigma.bias, float(settings.log_std_init))
        self.logits = dense_head(head_in, sum(self.branches), "logits", scheme) if self.branches else None
        self.critic_lstm = self.lstm if shared_critic else make_lstm(h, self.memory_size) if self.memory_size and critic else None
        self.value_head = dense_head(head_in, len(self.streams), "value", scheme) if critic else None

    def actor_parameters(self) -> list[nn.Parameter]:
        """The parameters of what the workers act with (encoder, body, heads)."""
        heads = [m for m in (self.lstm, self.mu, self.log_sigma, self.logits) if m is not None]
        params = list(self.encoder.parameters()) + list(self.body.parameters())
        params += [p for m in heads for p in m.parameters()]
        return params + ([self.log_std] if self.n_cont and self.log_sigma is None else [])

    # ------------------------------------------------------------------ pieces
    def vector_part(self, obs: list[torch.Tensor]) -> Optional[torch.Tensor]:
        """The flattened vector observations (what the normalizer sees), None if there are none."""
        return self.encoder.vector_part(obs) if self.encoder.vector else None

    def critic_features(self, obs: list[torch.Tensor]) -> torch.Tensor:
        """The critic's body output [B, h] (before its LSTM, if any)."""
        return self.critic_body(self.critic_encoder(obs))  # type: ignore[no-any-return]

    def critic_recurrent(
        self, features: torch.Tensor, memories: Optional[torch.Tensor]
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The critic's LSTM over its body's output, as ``recurrent`` for the actor."""
        return run_lstm(self.critic_lstm, features, memories)

    def values(self, obs: list[torch.Tensor], memories: Optional[torch.Tensor] = None) -> torch.Tensor:
        """[B, streams]: the critic's value of each reward stream (with memory: sequences from
        ``memories`` [S, memory_size], as the actor's)."""
        assert self.value_head is not None, "this network has no critic"
        return self.value_head(run_lstm(self.critic_lstm, self.critic_features(obs), memories)[0])

    def value(self, obs: list[torch.Tensor]) -> torch.Tensor:
        """[B]: the first stream's value."""
        return self.values(obs)[:, 0]

    def _branch_logits(self, hidden: torch.Tensor, masks: Optional[torch.Tensor]) -> list[torch.Tensor]:
        assert self.logits is not None
        logits = self.logits(hidden)
        if masks is not None:
            logits = torch.where(masks, logits, torch.full_like(logits, MASK_LOGIT))
        return list(torch.split(logits, list(self.branches), dim=1))

    def _distribution(self, hidden: torch.Tensor, masks: Optional[torch.Tensor]) -> ActionDistribution:
        mu = std = None
        if self.mu is not None:
            mu = self.mu(hidden)
            if self.log_sigma is not None:
                std = torch.clamp(self.log_sigma(hidden), LOG_SIGMA_MIN, LOG_SIGMA_MAX).exp()
            else:
                std = self.log_std.exp().expand_as(mu)
        logits = self._branch_logits(hidden, masks) if self.branches else []
        return ActionDistribution(mu, std, logits, self.tanh_squash)

    def recurrent(
        self, hidden: torch.Tensor, memories: Optional[torch.Tensor]
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The LSTM over the body's output [S * L, h], from ``memories`` [S, memory_size] (zeros when
        None: every row its own sequence); returns [S * L, memory_size / 2] and the memories after
        each sequence [S, memory_size]. Without memory, the input and None."""
        return run_lstm(self.lstm, hidden, memories)

    def distribution(
        self, obs: list[torch.Tensor], masks: Optional[torch.Tensor], memories: Optional[torch.Tensor] = None
    ) -> ActionDistribution:
        """The actor's action distribution for a batch of observations (sequences with memory; see the class)."""
        return self._distribution(self.recurrent(self.body(self.encoder(obs)), memories)[0], masks)

    def evaluate(
        self,
        obs: list[torch.Tensor],
        masks: Optional[torch.Tensor],
        continuous: torch.Tensor,
        discrete: torch.Tensor,
        memories: Optional[torch.Tensor] = None,
        critic_memories: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probabilities [B, D] (per continuous dimension and discrete branch, ``ActionDistribution.log_probs``)
        and entropy of given actions, and the values [B, streams], in one pass (with memory: rows are
        sequences starting from ``memories`` and ``critic_memories``, see the class)."""
        hidden = self.recurrent(self.body(self.encoder(obs)), memories)[0]
        dist = self._distribution(hidden, masks)
        assert self.value_head is not None, "this network has no critic"
        critic_hidden = hidden if self.shared_critic else run_lstm(self.critic_lstm, self.critic_features(obs), critic_memories)[0]
        return dist.log_probs(continuous, discrete), dist.entropy(), self.value_head(critic_hidden)

    def muscle_weights(self) -> ActorWeights:
        """The actor as numpy arrays (float32), for ml_arl.acting.muscle.Muscle."""
        encoders = []
        for enc in self.encoder.encoders:
            assert isinstance(enc, (VisualEncoder, ResNetEncoder))
            encoders.append(enc.weights())
        conditional = self.body if isinstance(self.body, ConditionalBody) else None
        plain = conditional.plain if conditional is not None else self.body
        assert isinstance(plain, nn.Sequential)
        linears = [m for m in plain if isinstance(m, nn.Linear)]
        hidden = self.hidden_units
        empty = Dense(np.zeros((hidden, 0), np.float32), np.zeros(0, np.float32))
        return ActorWeights(
            body=tuple(dense_weights(lin) for lin in linears),
            activation=self.activation,  # type: ignore[arg-type]
            mu=dense_weights(self.mu) if self.mu is not None else empty,
            log_std=np32(self.log_std),
            log_sigma=dense_weights(self.log_sigma) if self.log_sigma is not None else None,
            tanh_squash=self.tanh_squash,
            logits=dense_weights(self.logits) if self.logits is not None else empty,
            branches=self.branches,
            visual=tuple(self.encoder.visual),
            encoders=tuple(encoders),
            norm_mean=np32(self.normalizer.mean) if self.normalize else None,
            norm_std=np32(self.normalizer.std()) if self.normalize else None,
            lstm=self._lstm_weights(),
            entities=self.encoder.entities.weights() if self.encoder.entities is not None else None,
            hyper=conditional.weights() if conditional is not None else None,
        )

    def load_actor(self, weights: ActorWeights) -> None:
        """Take the actor of ``weights`` (``muscle_weights()``'s layout) as this network's: the body,
        the heads and the log std, for a network of vector observations with a plain body
        (``ml_arl.training.quick_start`` drew its first weights in numpy). The critic and the
        normaliser keep their own."""
        assert isinstance(self.body, nn.Sequential) and not self.encoder.encoders and self.lstm is None
        linears = [m for m in self.body if isinstance(m, nn.Linear)]
        pairs = list(zip(linears, weights.body))
        pairs += [(head, dense) for head, dense in ((self.mu, weights.mu), (self.logits, weights.logits)) if head is not None]
        if len(linears) != len(weights.body):
            raise ValueError(f"the weights have {len(weights.body)} body layers, the network {len(linears)}")
        with torch.no_grad():
            for lin, dense in pairs:
                lin.weight.copy_(torch.as_tensor(dense.w.T))
                lin.bias.copy_(torch.as_tensor(dense.b))
            if self.n_cont and self.log_sigma is None:
                self.log_std.copy_(torch.as_tensor(weights.log_std))

    def _lstm_weights(self) -> Optional[LSTMWeights]:
        if self.lstm is None:
            return None
        params = dict(self.lstm.named_parameters())
        bias = params["bias_ih_l0"] + params["bias_hh_l0"]
        return LSTMWeights(np32(params["weight_ih_l0"].T), np32(params["weight_hh_l0"].T), np32(bias))
