"""The actor's action distribution over one batch (torch): a Gaussian over the continuous
actions, optionally tanh-squashed, and a masked categorical per discrete branch.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from ml_arl.core.actor_constants import TANH_EPSILON


class ActionDistribution:
    """The actor's distribution over one batch: a Gaussian over the continuous actions (squashed
    by tanh for SAC, as ML-Agents' ``tanh_squash``) and a masked categorical per discrete branch.

    Continuous actions are what the trainer stores: the raw sample for PPO (the env receives
    ``clamp(a, -3, 3) / 3``), the tanh-squashed sample for SAC (the env receives it as is)."""

    def __init__(self, mu: Optional[torch.Tensor], std: Optional[torch.Tensor], branch_logits: list[torch.Tensor], tanh_squash: bool):
        self.mu = mu
        self.std = std
        self.branch_logits = branch_logits
        self.tanh_squash = tanh_squash
        # no argument validation: its checks (finite mean, positive std, real samples) are several
        # tensor ops per call, a noticeable part of a small network's training step
        self.normal = torch.distributions.Normal(mu, std, validate_args=False) if mu is not None and std is not None else None
        self._branch_log_probs: Optional[list[torch.Tensor]] = None

    def branch_log_probs(self) -> list[torch.Tensor]:
        """log-softmax of each discrete branch: [B, size] per branch."""
        if self._branch_log_probs is None:
            self._branch_log_probs = [torch.log_softmax(logits, dim=-1) for logits in self.branch_logits]
        return self._branch_log_probs

    def continuous_log_probs(self, continuous: torch.Tensor) -> torch.Tensor:
        """Per-dimension log-densities [B, n_cont] of stored continuous actions."""
        assert self.normal is not None
        if not self.tanh_squash:
            return self.normal.log_prob(continuous)
        capped = torch.clamp(continuous, -1.0 + TANH_EPSILON, 1.0 - TANH_EPSILON)
        return self.normal.log_prob(torch.atanh(capped)) - torch.log(1.0 - capped.pow(2) + TANH_EPSILON)

    def sample_raw(self) -> torch.Tensor:
        """A reparameterised sample of the Gaussian, before any squashing."""
        assert self.normal is not None
        return self.normal.rsample()

    def sample_continuous(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample (squashed for SAC) and its per-dimension log-densities."""
        assert self.normal is not None
        raw = self.normal.rsample()
        log_probs = self.normal.log_prob(raw)
        if not self.tanh_squash:
            return raw, log_probs
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): exact, and its gradient does not vanish
        # where tanh(u) rounds to +-1 (log(1 - a^2 + eps) is flat there, so a saturated dimension
        # would get no entropy pull back)
        log_det = 2.0 * (math.log(2.0) - raw - torch.nn.functional.softplus(-2.0 * raw))
        return torch.tanh(raw), log_probs - log_det

    def sample_discrete(self) -> torch.Tensor:
        """One action per branch, [B, n_branches] int64."""
        picks = [torch.multinomial(lp.exp(), 1) for lp in self.branch_log_probs()]
        return torch.cat(picks, dim=1) if picks else torch.zeros((0, 0), dtype=torch.int64)

    def log_probs(self, continuous: torch.Tensor, discrete: torch.Tensor) -> torch.Tensor:
        """[B, D]: the log-probability of stored actions per continuous dimension, then per discrete
        branch (ML-Agents' ActionLogProbs.flatten(); the workers store the same columns)."""
        parts: list[torch.Tensor] = []
        if self.normal is not None:
            parts.append(self.continuous_log_probs(continuous))
        for i, logp in enumerate(self.branch_log_probs()):
            parts.append(logp.gather(1, discrete[:, i : i + 1].long()))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    def entropy(self) -> torch.Tensor:
        """[B]: the Gaussian's (before squashing) averaged over continuous dimensions, as ML-Agents,
        plus each branch's."""
        entropies: list[torch.Tensor] = []
        if self.normal is not None:
            entropies.append(self.normal.entropy().mean(-1))
        for logp in self.branch_log_probs():
            entropies.append(-(logp.exp() * logp).sum(-1))
        return entropies[0] if len(entropies) == 1 else torch.stack(entropies).sum(0)

