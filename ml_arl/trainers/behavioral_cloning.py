"""Behavioral cloning (``behavioral_cloning:``) as ML-Agents' BC module: next to the RL loss, the
actor is trained to reproduce the demonstrations' actions, with its own Adam optimizer over the
actor at ``strength`` x the trainer's learning rate, decaying linearly to 0 over ``steps`` (held
constant when ``steps`` is 0). Each trainer update runs ``num_epoch`` passes over the
demonstrations (or over ``samples_per_update`` of them) in minibatches of ``batch_size``.

The loss, per minibatch: the mean squared error between the actor's sampled continuous actions
and the demonstrated ones, plus, for discrete branches, the cross-entropy of the demonstrated
action under the actor's (masked) distribution, averaged over branches.

Continuous actions are compared as the environment receives them, which is what a .demo file
holds (the actions the heuristic or the policy sent, in [-1, 1]): ``clamp(x, -3, 3) / 3`` of
PPO's and POCA's raw sample x, and SAC's tanh-squashed sample as it is. ML-Agents' BC module
takes the MSE between the policy's sample and the demonstrated action; for SAC that is the same
comparison, for PPO ML-Agents compares the raw sample (3 times the sent action) with the sent
action, which teaches the actor a third of the expert's action. A demonstrated action at a bound
(exactly -1 or +1: a keyboard or a gamepad held down, as Unity's ``Input.GetAxis`` records it) is
met by every sample the environment receives as that bound: for PPO every x beyond 3 (the clamp),
for SAC every squashed action beyond tanh(3) = 0.995. Each sample's error is its distance, in
the environment's units, to the nearest such action, so the loss is the MSE of the sent actions
wherever the sample lies within the bounds, never pushes a tanh pre-image towards infinity, and
still pulls back a sample beyond the opposite bound.

With an LSTM actor (network_settings.memory), as ML-Agents' BC module: the demonstrations are
cut into consecutive sequences of ``sequence_length`` steps (episode ends are not respected, as
ML-Agents'), each run from a zero memory; a minibatch is batch_size // sequence_length of them.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from ml_arl.core.actor_constants import ACTION_CLAMP
from ml_arl.core.behavior_id import brain_name
from ml_arl.demonstrations import Demonstrations
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.settings import BehavioralCloningSettings
from ml_arl.trainers.optimizers import Adam
from ml_arl.trainers.returns import decayed

LR_FLOOR = 1e-10


def continuous_error(raw: torch.Tensor, expert: torch.Tensor, tanh_squash: bool) -> torch.Tensor:
    """Per action, the distance (in the environment's units) from the action the environment would
    receive for the raw Gaussian sample ``raw`` to the demonstrated action ``expert`` (as sent,
    in [-1, 1]); at or beyond a bound, to every action the environment receives as that bound.

    Without squashing the environment receives ``clamp(raw, -3, 3) / 3``; with it, ``tanh(raw)``,
    whose bounds count as reached beyond ``tanh(3)``. In raw units the demonstrated action is a
    point (the pre-image of an action within the bounds) or a half-line (a bound); ``raw`` is
    compared with the nearest raw value of that set, through the map to the environment's units."""
    if tanh_squash:
        bound = math.tanh(ACTION_CLAMP)
        target = torch.atanh(expert.clamp(-bound, bound))
    else:
        bound = 1.0
        target = expert.clamp(-1.0, 1.0) * ACTION_CLAMP
    low = torch.where(expert <= -bound, torch.full_like(target, -math.inf), target)
    high = torch.where(expert >= bound, torch.full_like(target, math.inf), target)
    nearest = torch.minimum(torch.maximum(raw, low), high).detach()
    if tanh_squash:
        return torch.tanh(raw) - torch.tanh(nearest)
    return (raw - nearest) / ACTION_CLAMP


def bc_loss(
    network: ActorCritic, obs: list[torch.Tensor], continuous: torch.Tensor, discrete: torch.Tensor,
    memories: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The behavioral cloning loss of one minibatch of demonstrations (with an LSTM: sequences
    from ``memories``, as ``ActorCritic.distribution``): ML-Agents', with continuous actions
    compared as the environment receives them (module docstring)."""
    dist = network.distribution(obs, None, memories)
    loss = torch.zeros((), device=continuous.device)
    if network.n_cont:
        raw = dist.sample_raw()
        loss = loss + continuous_error(raw, continuous, network.tanh_squash).pow(2).mean()
    if network.branches:
        per_branch = [
            -logp.gather(1, discrete[:, i : i + 1].long()).squeeze(1) for i, logp in enumerate(dist.branch_log_probs())
        ]
        loss = loss + torch.stack(per_branch).mean()
    return loss


class BehavioralCloning:
    def __init__(
        self,
        settings: BehavioralCloningSettings,
        network: ActorCritic,
        demo: Demonstrations,
        policy_learning_rate: float,
        default_batch_size: int,
        default_num_epoch: int,
        device: torch.device,
        rng: np.random.Generator,
        sequence_length: int = 1,
    ):
        self.settings = settings
        self.sequence_length = sequence_length if network.lstm is not None else 1
        self.network = network
        self.device = device
        self.rng = rng
        self.initial_lr = policy_learning_rate * settings.strength
        self.batch_size = settings.batch_size or default_batch_size
        self.num_epoch = settings.num_epoch or default_num_epoch
        self.obs = [torch.as_tensor(o, dtype=torch.float32, device=device) for o in demo.obs]
        self.continuous = torch.as_tensor(demo.continuous, dtype=torch.float32, device=device)
        self.discrete = torch.as_tensor(demo.discrete, dtype=torch.int64, device=device)
        self.size = int(demo.steps)
        self.optimizer = Adam(network.actor_parameters(), lr=self.initial_lr)

    def learning_rate(self, step: int) -> float:
        if self.settings.steps == 0:
            return self.initial_lr
        return decayed(self.initial_lr, LR_FLOOR, step, self.settings.steps, "linear")

    def update(self, step: int) -> dict[str, float]:
        """The BC passes of one trainer update at trainer step ``step``; ``Losses/Pretraining Loss``."""
        lr = self.learning_rate(step)
        if lr <= LR_FLOOR or self.size == 0:
            return {"Losses/Pretraining Loss": 0.0}
        self.optimizer.lr = lr
        # the unit of a minibatch: a step, or with an LSTM a sequence of them
        length = self.sequence_length
        units = self.size // length
        if units == 0:
            return {"Losses/Pretraining Loss": 0.0}
        batch = max(min(self.batch_size, self.size) // length, 1)
        batches = units // batch
        if self.settings.samples_per_update > 0:
            batches = max(1, min(batches, self.settings.samples_per_update // (batch * length)))
        offsets = torch.arange(length, device=self.device)
        losses: list[torch.Tensor] = []
        for _ in range(self.num_epoch):
            order = torch.as_tensor(self.rng.permutation(units), device=self.device)
            for i in range(batches):
                picks = order[i * batch : (i + 1) * batch]
                idx = (picks[:, None] * length + offsets).reshape(-1) if length > 1 else picks
                memories = None
                if self.network.lstm is not None:
                    memories = torch.zeros(len(picks), self.network.memory_size, device=self.device)
                loss = bc_loss(self.network, [o[idx] for o in self.obs], self.continuous[idx], self.discrete[idx], memories)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                losses.append(loss.detach())
        return {"Losses/Pretraining Loss": float(torch.stack(losses).mean())}

    def state(self) -> dict[str, object]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state(self, state: Optional[dict[str, object]]) -> None:
        if state is not None and "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[arg-type]


def make_behavioral_cloning(
    behavior: str,
    settings: Optional[BehavioralCloningSettings],
    network: ActorCritic,
    policy_learning_rate: float,
    default_batch_size: int,
    default_num_epoch: int,
    device: torch.device,
    rng: np.random.Generator,
    sequence_length: int = 1,
) -> Optional[BehavioralCloning]:
    """The BC module of a behavior with ``behavioral_cloning`` (None without)."""
    if settings is None:
        return None
    from ml_arl.demonstrations import load_demonstrations

    where = f"behaviors.{brain_name(behavior)}.behavioral_cloning.demo_path"
    demo = load_demonstrations(settings.demo_path, where)
    return BehavioralCloning(
        settings, network, demo, policy_learning_rate, default_batch_size, default_num_epoch, device, rng, sequence_length
    )
