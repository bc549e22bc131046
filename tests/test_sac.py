"""SAC: the losses and the soft update against hand values, the replay buffer, and learning on
ML-Agents-style goal-reaching tasks with ML-Agents' own SAC test hyperparameters (batch 8,
buffer_init_steps 100, tau 0.01, init_entcoef 0.01, learning rate 5e-3, one layer of 16 units;
success = the mean of the last 5 episode returns above 0.9, 0.8 in 2-D)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from ml_arl.messages import Trajectory
from ml_arl.settings import build_run_options
from ml_arl.trainer_controller import TrainerController
from ml_arl.trainers.replay_buffer import ReplayBuffer
from ml_arl.trainers.sac import condense_q, sac_losses
from ml_arl.trainers.sac_networks import soft_update

from .simple_envs import SUCCESS_THRESHOLD, last5

# ------------------------------------------------------------------ maths


def test_soft_update_by_hand() -> None:
    source, target = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        source.weight.fill_(1.0)
        source.bias.fill_(2.0)
        target.weight.fill_(0.0)
        target.bias.fill_(-2.0)
    soft_update(source, target, 0.25)
    assert torch.allclose(target.weight, torch.full((1, 2), 0.25))
    assert torch.allclose(target.bias, torch.tensor([-1.0]))  # 0.25 * 2 + 0.75 * -2


def _continuous_case() -> dict[str, Any]:
    # two experiences, one stream, one continuous action
    return dict(
        q1=torch.tensor([[1.0], [2.0]]), q2=torch.tensor([[1.5], [1.0]]),
        target_values=torch.tensor([[3.0], [4.0]]), rewards=torch.tensor([[1.0], [0.0]]),
        dones=torch.tensor([0.0, 1.0]), gammas=torch.tensor([0.5]), use_dones=torch.tensor([1.0]),
        values=torch.tensor([[2.0], [0.0]], requires_grad=True),
        q1_policy=torch.tensor([[[2.0]], [[1.0]]], requires_grad=True), q2_policy=torch.tensor([[[3.0]], [[0.5]]]),
        cont_log_probs=torch.tensor([[-1.0], [-2.0]], requires_grad=True), disc_log_probs=None, branches=(),
        log_alpha_cont=torch.tensor([math.log(0.5)], requires_grad=True), log_alpha_disc=None,
        target_entropy_cont=-1.0, target_entropy_disc=None,
    )


def test_sac_losses_continuous_by_hand() -> None:
    loss = sac_losses(**_continuous_case())
    loss = type(loss)(*(t.detach() for t in loss))
    # backups: 1 + 0.5 * 3 = 2.5; 0 + 0 (done) = 0
    assert float(loss.q1) == pytest.approx(0.5 * ((2.5 - 1.0) ** 2 + (0 - 2.0) ** 2) / 2)
    assert float(loss.q2) == pytest.approx(0.5 * ((2.5 - 1.5) ** 2 + (0 - 1.0) ** 2) / 2)
    # V targets: min(Q1, Q2) of the policy's action - alpha * log pi = 2 + 0.5 = 2.5; 0.5 + 1 = 1.5
    assert float(loss.value) == pytest.approx(0.5 * ((2.0 - 2.5) ** 2 + (0.0 - 1.5) ** 2) / 2)
    # policy: mean(alpha * log pi - Q1) = mean(-0.5 - 2, -1 - 1)
    assert float(loss.policy) == pytest.approx(((-0.5 - 2.0) + (-1.0 - 1.0)) / 2)
    # entropy: -mean(log alpha * (log pi + target)) = -log 0.5 * mean(-2, -3)
    assert float(loss.entropy) == pytest.approx(-math.log(0.5) * (-2.5))


def test_sac_losses_ignore_done_streams_bootstrap() -> None:
    case = _continuous_case()
    case.update(use_dones=torch.tensor([0.0]))  # curiosity and RND: the episode end does not cut the backup
    loss = sac_losses(**case)
    assert float(loss.q1) == pytest.approx(0.5 * ((2.5 - 1.0) ** 2 + (2.0 - 2.0) ** 2) / 2)


def test_sac_losses_discrete_by_hand() -> None:
    # one experience, one stream, one branch of two actions with probabilities 0.25 / 0.75
    log_p = torch.log(torch.tensor([[0.25, 0.75]]))
    q1_policy = torch.tensor([[[1.0, 3.0]]])
    q2_policy = torch.tensor([[[2.0, 2.0]]])
    alpha = 0.5
    loss = sac_losses(
        q1=torch.tensor([[1.0]]), q2=torch.tensor([[1.0]]), target_values=torch.tensor([[0.0]]),
        rewards=torch.tensor([[1.0]]), dones=torch.tensor([0.0]), gammas=torch.tensor([0.9]),
        use_dones=torch.tensor([1.0]), values=torch.tensor([[0.0]]), q1_policy=q1_policy, q2_policy=q2_policy,
        cont_log_probs=None, disc_log_probs=log_p, branches=(2,), log_alpha_cont=None,
        log_alpha_disc=torch.tensor([math.log(alpha)]), target_entropy_cont=0.0,
        target_entropy_disc=torch.tensor([0.2 * math.log(2)]),
    )
    p = np.array([0.25, 0.75])
    neg_entropy = float(np.sum(p * np.log(p)))
    expected_q1, expected_q2 = float(p @ [1.0, 3.0]), float(p @ [2.0, 2.0])
    v_backup = min(expected_q1, expected_q2) - alpha * neg_entropy
    assert float(loss.value) == pytest.approx(0.5 * v_backup**2)
    assert float(loss.q1) == pytest.approx(0.0)  # backup 1 + 0.9 * 0 = 1 = Q
    assert float(loss.policy) == pytest.approx(alpha * neg_entropy - expected_q1)
    assert float(loss.entropy) == pytest.approx(-math.log(alpha) * (neg_entropy + 0.2 * math.log(2)))


def test_condense_q_picks_the_taken_action_and_averages_branches() -> None:
    q = torch.tensor([[[1.0, 2.0, 10.0, 20.0, 30.0]]])  # one stream, branches of 2 and 3 actions
    picked = condense_q(q, torch.tensor([[1, 2]]), (2, 3))
    assert picked.tolist() == [[(2.0 + 30.0) / 2]]


def test_replay_buffer_next_obs_dones_and_ring(tmp_path: Path) -> None:
    buf = ReplayBuffer(5, [(1,)], 1, (), torch.device("cpu"))

    def traj(start: float, n: int, done: bool, interrupted: bool = False) -> Trajectory:
        obs = np.arange(start, start + n, dtype=np.float32).reshape(n, 1)
        return Trajectory("B", "0-0", [obs], [np.array([start + n], np.float32)], np.zeros((n, 1), np.float32),
                          np.zeros((n, 0), np.int32), None, np.zeros(n, np.float32), np.ones(n, np.float32),
                          np.zeros(n, np.float32), 0, done, interrupted, 0)

    buf.add(traj(0, 3, done=True))
    assert buf.next_obs[0][:3, 0].tolist() == [1.0, 2.0, 3.0]
    assert buf.dones[:3].tolist() == [0.0, 0.0, 1.0]
    buf.add(traj(10, 3, done=True, interrupted=True))  # a max-step cut bootstraps: no done
    assert len(buf) == 5 and buf.dones.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert buf.obs[0][:, 0].tolist() == [12.0, 1.0, 2.0, 10.0, 11.0]  # the oldest was overwritten
    path = tmp_path / "buffer.npz"
    buf.save(str(path))
    copy = ReplayBuffer(5, [(1,)], 1, (), torch.device("cpu"))
    copy.load(str(path))
    assert len(copy) == 5 and sorted(copy.obs[0][:, 0].tolist()) == sorted(buf.obs[0][:, 0].tolist())
    wrong = ReplayBuffer(5, [(2,)], 1, (), torch.device("cpu"))
    wrong.load(str(path))  # another behavior's shapes: a warning, and it starts empty
    assert len(wrong) == 0


# ------------------------------------------------------------------ learning

SAC_TEST_HYPERPARAMETERS = {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant", "batch_size": 8,
                            "buffer_init_steps": 100, "buffer_size": 5000, "tau": 0.01, "init_entcoef": 0.01}


def sac_config(tmp_path: Path, env_args: list[str], max_steps: int = 1000, **hyperparameters: Any) -> dict[str, Any]:
    return {
        "env_settings": {"env_path": "tests.simple_envs:goal_reach", "env_args": env_args, "manager": "inprocess", "seed": 1},
        "checkpoint_settings": {"results_dir": str(tmp_path), "run_id": "sac"},
        "default_settings": {
            "trainer_type": "sac",
            "hyperparameters": {**SAC_TEST_HYPERPARAMETERS, **hyperparameters},
            "network_settings": {"num_layers": 1, "hidden_units": 16},
            "summary_freq": 100,
            "max_steps": max_steps,
        },
        "behaviors": {},
    }


def train(config: dict[str, Any]) -> tuple[TrainerController, list[float]]:
    controller = TrainerController(build_run_options(config, {}, "test"))
    controller.start_learning()
    return controller, list(controller.managers["GoalReach"].recent_rewards)


@pytest.mark.parametrize("actions", [["continuous=1", "discrete=0"], ["continuous=0", "discrete=1"]], ids=["continuous", "discrete"])
def test_sac_learns_goal_reach(tmp_path: Path, actions: list[str]) -> None:
    _, returns = train(sac_config(tmp_path, [*actions, "solved_at=0.9"]))  # ends once solved, or at 1000 steps
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]


@pytest.mark.slow
@pytest.mark.parametrize("actions", [["continuous=2", "discrete=0"], ["continuous=0", "discrete=2"]], ids=["continuous", "discrete"])
def test_sac_learns_goal_reach_in_2d(tmp_path: Path, actions: list[str]) -> None:
    # the run ends once solved (the last 5 returns above 0.8), or at ML-Agents' 6000 steps
    config = sac_config(tmp_path, [*actions, "step_size=0.8", "solved_at=0.8"], max_steps=6000, buffer_init_steps=2000)
    _, returns = train(config)
    assert last5(returns) > 0.8, returns[-10:]


@pytest.mark.slow
@pytest.mark.parametrize("actions", [["continuous=1", "discrete=0"], ["continuous=0", "discrete=1"]], ids=["continuous", "discrete"])
def test_sac_learns_from_images(tmp_path: Path, actions: list[str]) -> None:
    config = sac_config(tmp_path, [*actions, "vectors=0", "images=1", "solved_at=0.9"], batch_size=16, learning_rate=3e-4)
    _, returns = train(config)
    assert last5(returns) > SUCCESS_THRESHOLD, returns[-10:]
