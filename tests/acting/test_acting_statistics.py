"""Between updates, a PPO trainer publishes its policy again when its observation normaliser moved:
the workers act with statistics as fresh as ML-Agents' (whose acting policy object is the trainer's)."""
from __future__ import annotations

import numpy as np
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import Trajectory
from ml_arl.results.summary_writers import StatsReporter
from ml_arl.settings import build_run_options
from ml_arl.trainers.ppo.trainer import PPOTrainer
from ml_arl.trainers.queues import AgentManagerQueue

SPEC = BehaviorSpec([ObservationSpec((2,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "v")], ActionSpec(1, ()))


def _trainer(normalize: bool) -> tuple[PPOTrainer, AgentManagerQueue[PolicySnapshot]]:
    section = {"hyperparameters": {"batch_size": 8, "buffer_size": 64},
               "network_settings": {"hidden_units": 8, "normalize": normalize}}
    settings = build_run_options({"behaviors": {"B": section}}, {}, "test").behaviors["B"]
    trainer = PPOTrainer("B", settings, SPEC, StatsReporter("B", []), None, torch.device("cpu"))
    trajectories: AgentManagerQueue[Trajectory] = AgentManagerQueue("B")
    policies: AgentManagerQueue[PolicySnapshot] = AgentManagerQueue("B")
    trainer.subscribe_trajectory_queue(trajectories)
    trainer.publish_policy_queue(policies)
    trainer.policy_snapshot()  # what the workers start with (the controller takes it first)
    return trainer, policies


def _piece(rng: np.random.Generator, steps: int, center: float) -> Trajectory:
    return Trajectory(
        behavior="B", agent_id="0-1", obs=[(center + rng.normal(size=(steps, 2))).astype(np.float32)],
        next_obs=[rng.normal(size=(2,)).astype(np.float32)], continuous=rng.normal(size=(steps, 1)).astype(np.float32),
        discrete=np.zeros((steps, 0), np.int32), allowed=None, log_prob=np.full(steps, -1.0, np.float32),
        rewards=np.zeros(steps, np.float32), group_rewards=np.zeros(steps, np.float32), group_id=0,
        done=True, interrupted=False, policy_version=0,
    )


def test_moved_statistics_are_published_with_the_same_weights_and_settled_ones_are_not() -> None:
    rng = np.random.default_rng(0)
    trainer, policies = _trainer(normalize=True)
    trainer.trajectory_queues[0].put(_piece(rng, 8, center=3.0))
    assert trainer.advance() == 1 and not trainer.ready_to_update()
    published = policies.drain()
    assert len(published) == 1 and published[0].version == trainer.policy_version == 0
    np.testing.assert_allclose(published[0].weights.norm_mean, trainer.network.normalizer.mean.numpy(), rtol=1e-6)
    assert published[0].weights.norm_mean.min() > 2.0  # 8 samples about 3 beside the prior's one at 0
    trainer.trajectory_queues[0].put(_piece(rng, 8, center=3.0))  # the means move by 0.13 and 0.35 of their deviations
    trainer.advance()
    assert len(policies.drain()) == 1
    for _ in range(4):
        trainer.trajectory_queues[0].put(_piece(rng, 8, center=3.0))
        trainer.advance()
    policies.drain()
    trainer.policy_snapshot()  # the workers act with these statistics (41 samples)
    mean = trainer.network.normalizer.mean.numpy().astype(np.float32)
    at_mean = _piece(rng, 2, center=0.0)
    at_mean.obs[0][:] = mean  # the mean stays; the deviation shrinks by sqrt(41 / 43): 2.3%
    trainer.trajectory_queues[0].put(at_mean)
    trainer.advance()
    assert policies.drain() == []
    trainer.trajectory_queues[0].put(_piece(rng, 8, center=10.0))
    trainer.advance()
    assert len(policies.drain()) == 1


def test_without_normalize_only_updates_publish() -> None:
    rng = np.random.default_rng(0)
    trainer, policies = _trainer(normalize=False)
    for _ in range(7):
        trainer.trajectory_queues[0].put(_piece(rng, 8, center=3.0))
        trainer.advance()
    assert policies.drain() == []
    trainer.trajectory_queues[0].put(_piece(rng, 8, center=3.0))
    trainer.advance()  # 64 steps: the buffer is full, one update
    assert [p.version for p in policies.drain()] == [1]
