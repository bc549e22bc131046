"""GAIL (Ho & Ermon 2016) with ML-Agents' options: VAIL (Peng et al. 2018) and the gradient
penalty of WGAN-GP (Gulrajani et al. 2017).

A discriminator D estimates how likely a step comes from the demonstrations: the signal's
NetworkBody reads the observations (and, with ``use_actions``, the actions one-hot per branch
plus the step's done flag), then a linear unit and a sigmoid (with VAIL, through a 128-wide
stochastic code z ~ N(mu, sigma^2)). The reward of a step is -log(1 - D * (1 - 1e-7)).

Each update samples as many demonstration steps as the policy batch has (with replacement) and
minimises, as ML-Agents does:

    -mean(log(D(expert) + 1e-7) + log(1 - D(policy) + 1e-7))       "Losses/GAIL Loss"
  + beta * (KL - 0.5)                                               VAIL only; beta >= 0 then
                                                                    moves by 0.0005 * (KL - 0.5)
  + 10 * mean((sqrt(|dD/dx|^2 + 1e-7) - 1)^2)                       "Policy/GAIL Grad Mag Loss"

where x are points drawn elementwise uniformly between the policy and expert inputs. Like
ML-Agents, the penalty takes the gradient with respect to the first observation only (never the
actions or other observations); unlike ML-Agents, whose ``sum(dim=1)`` reduces only one axis of
an image, the norm here runs over all of that observation's elements. With ``normalize`` the
vector observations are normalised with the demonstrations' running statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np
import torch
from mlagents_envs.base_env import BehaviorSpec
from torch import nn

from ml_arl.networks.encoders import Normalizer, vector_size
from ml_arl.settings import GAILSettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.reward_signals.base import (
    RewardProvider,
    SignalBatch,
    StateEmbedding,
    dense,
    flatten_actions,
    to_numpy,
    update_normalizer,
)

EPSILON = 1e-7


def discriminator_loss(expert_estimate: torch.Tensor, policy_estimate: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with the expert labelled 1 and the policy 0."""
    return -(torch.log(expert_estimate + EPSILON) + torch.log(1.0 - policy_estimate + EPSILON)).mean()


def vail_kl(z_sigma: torch.Tensor, expert_mu: torch.Tensor, policy_mu: torch.Tensor) -> torch.Tensor:
    """ML-Agents' KL term of the VAIL bottleneck: mean over steps of
    -sum_z(1 + log sigma^2 - 0.5 mu_expert^2 - 0.5 mu_policy^2 - sigma^2)."""
    var = z_sigma**2
    return (-(1.0 + var.log() - 0.5 * expert_mu**2 - 0.5 * policy_mu**2 - var).sum(dim=1)).mean()


def gradient_magnitude(
    estimate: Callable[[list[torch.Tensor]], torch.Tensor],
    policy_inputs: list[torch.Tensor],
    expert_inputs: list[torch.Tensor],
) -> torch.Tensor:
    """mean((sqrt(|dD/dx_0|^2 + 1e-7) - 1)^2) at points x drawn elementwise uniformly between the
    policy and the expert inputs; x_0 is the first input (``estimate`` maps the inputs to [N])."""
    points = []
    for policy, expert in zip(policy_inputs, expert_inputs):
        eps = torch.rand_like(policy)
        points.append((eps * policy + (1.0 - eps) * expert).detach().requires_grad_(True))
    (grad,) = torch.autograd.grad(estimate(points).sum(), points[0], create_graph=True)
    norm = torch.sqrt((grad.reshape(grad.shape[0], -1) ** 2).sum(dim=1) + EPSILON)
    return ((norm - 1.0) ** 2).mean()


class GAILProvider(RewardProvider):
    name = "gail"
    display_name = "Gail"

    GRADIENT_PENALTY_WEIGHT = 10.0
    Z_SIZE = 128
    ALPHA = 0.0005  # step size of VAIL's beta
    MUTUAL_INFORMATION = 0.5  # VAIL's information bottleneck
    INITIAL_BETA = 0.0

    beta: torch.Tensor

    def __init__(self, spec: BehaviorSpec, settings: GAILSettings, expert: SignalBatch):
        super().__init__(settings)
        network = settings.network_settings
        self.branches = tuple(int(b) for b in spec.action_spec.discrete_branches)
        self.use_actions = settings.use_actions
        self.use_vail = settings.use_vail
        check_expert(spec, expert)
        self.expert = expert  # not part of the state: it comes from demo_path again on resume
        extra = spec.action_spec.continuous_size + sum(self.branches) + 1 if self.use_actions else 0  # +1: done
        self.normalizer = Normalizer(vector_size(spec))
        self.embedding = StateEmbedding(spec, network, self.normalizer, extra)
        estimator_in = network.hidden_units
        self.z_mu: Optional[nn.Linear] = None
        if self.use_vail:
            estimator_in = self.Z_SIZE
            self.z_mu = dense(network.hidden_units, self.Z_SIZE, "kaiming", gain=0.1)
            self.z_sigma = nn.Parameter(torch.ones(self.Z_SIZE))
        self.register_buffer("beta", torch.tensor(self.INITIAL_BETA))
        self.estimator = dense(estimator_in, 1, "xavier", gain=0.2)
        self.optimizer = Adam(self.parameters(), lr=settings.learning_rate)

    def inputs(self, batch: SignalBatch) -> list[torch.Tensor]:
        """The discriminator's inputs: the observations, then (use_actions) [actions, done]."""
        if not self.use_actions:
            return list(batch.obs)
        actions = flatten_actions(batch.continuous, batch.discrete, self.branches)
        return [*batch.obs, torch.cat([actions, batch.dones.float().unsqueeze(1)], dim=1)]

    def estimate(self, inputs: list[torch.Tensor], noise: bool) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """D per step ([N], in (0, 1)) and, with VAIL, the code's mean. ``noise`` samples the code."""
        obs, extra = (inputs[:-1], inputs[-1]) if self.use_actions else (inputs, None)
        hidden = self.embedding(obs, extra)
        mu = None
        if self.z_mu is not None:
            mu = self.z_mu(hidden)
            hidden = mu + torch.randn_like(mu) * self.z_sigma if noise else mu
        return torch.sigmoid(self.estimator(hidden)).squeeze(1), mu

    def sample_expert(self, n: int, device: torch.device) -> SignalBatch:
        idx = torch.randint(len(self.expert), (n,))
        return self.expert.select(idx).to(device)

    def loss(self, batch: SignalBatch) -> tuple[torch.Tensor, dict[str, float]]:
        expert = self.sample_expert(len(batch), batch.dones.device)
        update_normalizer(self.normalizer, self.embedding, expert.obs, self.sync)
        policy_in, expert_in = self.inputs(batch), self.inputs(expert)
        policy_estimate, policy_mu = self.estimate(policy_in, noise=True)
        expert_estimate, expert_mu = self.estimate(expert_in, noise=True)
        bce = discriminator_loss(expert_estimate, policy_estimate)
        stats = {
            "Policy/GAIL Policy Estimate": policy_estimate.mean().item(),
            "Policy/GAIL Expert Estimate": expert_estimate.mean().item(),
            "Losses/GAIL Loss": bce.item(),
        }
        total = bce
        if self.use_vail:
            assert policy_mu is not None and expert_mu is not None
            kl = vail_kl(self.z_sigma, expert_mu, policy_mu)
            total = total + self.beta.clone() * (kl - self.MUTUAL_INFORMATION)
            with torch.no_grad():  # the loss above used beta before this step, as ML-Agents
                self.beta.copy_(torch.clamp(self.beta + self.ALPHA * (kl - self.MUTUAL_INFORMATION), min=0.0))
            stats["Policy/GAIL Beta"] = self.beta.item()
            stats["Losses/GAIL KL Loss"] = kl.item()
        penalty = self.GRADIENT_PENALTY_WEIGHT * gradient_magnitude(
            lambda points: self.estimate(points, noise=True)[0], policy_in, expert_in
        )
        stats["Policy/GAIL Grad Mag Loss"] = penalty.item()
        return total + penalty, stats

    def evaluate(self, batch: SignalBatch) -> np.ndarray:
        with torch.no_grad():
            estimate, _ = self.estimate(self.inputs(batch), noise=False)
            return to_numpy(-torch.log(1.0 - estimate * (1.0 - EPSILON)))


def check_expert(spec: BehaviorSpec, expert: SignalBatch) -> None:
    """Raise ValueError when the demonstrations do not fit the behavior."""
    problems = []
    shapes = [tuple(o.shape) for o in spec.observation_specs]
    given = [tuple(o.shape[1:]) for o in expert.obs]
    if given != shapes:
        problems.append(f"observation shapes {given}, the behavior's {shapes}")
    n_cont, n_branches = spec.action_spec.continuous_size, len(spec.action_spec.discrete_branches)
    if expert.continuous.shape[1:] != (n_cont,) or expert.discrete.shape[1:] != (n_branches,):
        problems.append(
            f"actions of shapes {tuple(expert.continuous.shape[1:])} (continuous) and {tuple(expert.discrete.shape[1:])} "
            f"(discrete branches), the behavior's ({n_cont},) and ({n_branches},)"
        )
    if len(expert) == 0:
        problems.append("no steps")
    if problems:
        raise ValueError("GAIL demonstrations do not fit the behavior: " + "; ".join(problems))
