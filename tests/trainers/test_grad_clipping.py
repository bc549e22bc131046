"""``max_grad_norm_per_network`` (PPO and POCA): the actor's and the critic's gradients clipped to max_grad_norm
each on its own, as harl's PPO clips its two networks, instead of jointly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ml_arl.trainers.ppo.trainer as ppo_module
from ml_arl.core.exceptions import ConfigError
from ml_arl.core.experience import Trajectory
from ml_arl.settings import build_run_options
from tests.trainers.test_learners import _trainer, _trajectories


def _clipped_norms(monkeypatch: pytest.MonkeyPatch, **hyperparameters: Any) -> tuple[Any, list[tuple[int, float]]]:
    """One update on trajectories whose rewards are in the thousands (the value loss dwarfs the policy's); returns
    the trainer and, per clip call, (the number of parameters it clipped, their gradient norm after clipping)."""
    calls: list[tuple[int, float]] = []
    real = ppo_module.clip_grad_norm

    def recording(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
        out = real(params, max_norm)
        grads = [p.grad.flatten() for p in params if p.grad is not None]
        calls.append((len(params), float(torch.linalg.vector_norm(torch.cat(grads)))))
        return out

    monkeypatch.setattr(ppo_module, "clip_grad_norm", recording)
    trainer = _trainer(**hyperparameters)
    for traj in _trajectories(1):
        trainer.add_experience(Trajectory(**{**traj._asdict(), "rewards": (np.asarray(traj.rewards) * 1000).astype(np.float32)}))
    trainer.update()
    return trainer, calls


def test_per_network_clipping_clips_the_actor_and_the_critic_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, calls = _clipped_norms(monkeypatch, max_grad_norm_per_network=True)
    actor = {id(p) for p in trainer.network.actor_parameters()}
    groups = trainer.clip_groups
    assert [len(g) for g in groups] == [len(actor), len(trainer.optimizer.params) - len(actor)]
    assert {id(p) for p in groups[0]} == actor and not actor & {id(p) for p in groups[1]}
    # 3 epochs of one minibatch, two clip calls each; each network's gradient is clipped to 0.5 on its own
    assert [n for n, _ in calls] == [len(g) for g in groups] * 3
    actor_norms = [norm for k, (_, norm) in enumerate(calls) if k % 2 == 0]
    assert all(norm <= 0.5 + 1e-5 for _, norm in calls)
    # the actor keeps a gradient of its own size: the critic's (thousands) does not shrink it
    assert min(actor_norms) > 1e-2, actor_norms


def test_joint_clipping_lets_a_large_value_loss_shrink_the_actor_step(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, calls = _clipped_norms(monkeypatch)
    assert trainer.clip_groups == [trainer.optimizer.params]
    assert [n for n, _ in calls] == [len(trainer.optimizer.params)] * 3
    _, per_network = _clipped_norms(monkeypatch, max_grad_norm_per_network=True)
    # jointly clipped to 0.5, the actor's share of that norm is far below its own clipped size
    actor_ids = {id(p) for p in trainer.network.actor_parameters()}
    grads = [p.grad.flatten() for p in trainer.optimizer.params if id(p) in actor_ids and p.grad is not None]
    joint_actor = float(torch.linalg.vector_norm(torch.cat(grads)))
    assert joint_actor < 0.1 * per_network[-2][1], (joint_actor, per_network[-2])


def test_per_network_clipping_needs_max_grad_norm() -> None:
    section = {"hyperparameters": {"max_grad_norm_per_network": True}}
    with pytest.raises(ConfigError, match="max_grad_norm_per_network needs max_grad_norm"):
        build_run_options({"behaviors": {"B": section}}, {}, "test")
