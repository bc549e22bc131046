"""Reward normalisation (``reward_signals.<signal>.normalize``): the running scale of the
discounted return, by hand, across time-horizon cuts and agents; what the trainer learns from
and what it reports; the config check for SAC; the state a checkpoint keeps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.core.experience import Trajectory
from ml_arl.settings import TrainerSettings
from ml_arl.trainers.return_scale import CLIP, ReturnScaler
from ml_arl.trainers.reward_streams import RewardStreams

SPEC = BehaviorSpec(
    [ObservationSpec((1,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "obs")], ActionSpec(1, ()),
)


def traj(agent: str, rewards: list[float], start: bool, done: bool) -> Trajectory:
    n = len(rewards)
    return Trajectory(
        behavior="B", agent_id=agent, obs=[np.zeros((n, 1), np.float32)], next_obs=[np.zeros(1, np.float32)],
        continuous=np.zeros((n, 1), np.float32), discrete=np.zeros((n, 0), np.int32), allowed=None,
        log_prob=np.zeros((n, 1), np.float32), rewards=np.asarray(rewards, np.float32), group_rewards=np.zeros(n, np.float32),
        group_id=0, done=done, interrupted=False, policy_version=0, episode_start=start,
    )


def test_the_scale_is_the_deviation_of_the_running_return_across_cuts_and_agents() -> None:
    scaler = ReturnScaler(gamma=0.9)
    scaler.scale("a", np.array([1.0, 2.0]), episode_start=True, done=False)  # returns 1, 2.9
    scaler.scale("b", np.array([4.0]), episode_start=True, done=True)  # 4: agent b's own return
    scaler.scale("a", np.array([3.0]), episode_start=False, done=True)  # 2.9 * 0.9 + 3 = 5.61: the cut carried over
    out = scaler.scale("a", np.array([1.0, -2.0]), episode_start=True, done=False)  # a new episode: 1, -1.1
    seen = np.array([1.0, 2.9, 4.0, 5.61, 1.0, -1.1])
    assert scaler.var == pytest.approx(seen.var(), rel=1e-3)  # the prior (variance 1, weight 1e-4) barely counts
    assert scaler.mean == pytest.approx(seen.mean(), rel=1e-3)
    assert out.tolist() == pytest.approx([1.0 / np.sqrt(seen.var()), -2.0 / np.sqrt(seen.var())], rel=1e-3)
    assert out.dtype == np.float32


def test_scaled_rewards_are_clipped_and_the_first_short_trajectory_is_not_blown_up() -> None:
    scaler = ReturnScaler(gamma=0.99)
    first = scaler.scale("a", np.array([0.5]), episode_start=True, done=True)  # one return: variance 0 but for the prior
    assert abs(first[0]) <= CLIP and first[0] > 0
    for _ in range(20):
        scaler.scale("a", np.full(50, 0.01), episode_start=True, done=True)
    assert scaler.scale("a", np.array([1e3, -1e3]), episode_start=True, done=True).tolist() == [CLIP, -CLIP]


def test_state_round_trip() -> None:
    scaler = ReturnScaler(gamma=0.9)
    scaler.scale("a", np.array([1.0, 5.0, 2.0]), episode_start=True, done=True)
    again = ReturnScaler(gamma=0.9)
    again.load_state(scaler.state())
    assert again.scale("x", np.array([2.0]), True, True) == pytest.approx(scaler.scale("x", np.array([2.0]), True, True))


class Stats:
    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []

    def add_stat(self, key: str, value: float, aggregation: str = "average") -> None:
        self.seen.append((key, value))


def streams(**extrinsic: Any) -> RewardStreams:
    settings = TrainerSettings.model_validate({"reward_signals": {"extrinsic": {"gamma": 0.5, **extrinsic}}})
    return RewardStreams("B", settings, SPEC, lambda actions: actions)


def test_the_trainer_learns_from_scaled_rewards_and_reports_the_raw_ones() -> None:
    plain, scaled = streams(strength=2.0), streams(strength=2.0, normalize=True)
    stats_plain, stats_scaled = Stats(), Stats()
    for t in (traj("a", [10.0, 20.0], True, False), traj("a", [30.0], False, True)):
        raw = plain.rewards(t, stats_plain)  # type: ignore[arg-type]
        learned = scaled.rewards(t, stats_scaled)  # type: ignore[arg-type]
    assert raw[:, 0].tolist() == [60.0]
    expected = 2.0 * 30.0 / np.sqrt(np.var([10.0, 25.0, 42.5]))  # returns with gamma 0.5, times the strength
    assert learned[:, 0].tolist() == pytest.approx([expected], rel=1e-3)
    # the episode's reward as reported is the same with and without normalisation: 2 x (10 + 20 + 30)
    assert stats_plain.seen == stats_scaled.seen == [("Policy/Extrinsic Reward", 120.0)]
    assert "extrinsic.return_scale" in scaled.state() and scaled.stateful and not plain.stateful
    again = streams(strength=2.0, normalize=True)
    again.load_state(scaled.state())
    assert again.scalers[0].var == scaled.scalers[0].var


def test_sac_refuses_normalize_with_a_line_that_says_where() -> None:
    from ml_arl.settings.errors import validate

    _, problems = validate(TrainerSettings, {"trainer_type": "sac", "reward_signals": {"extrinsic": {"normalize": True}}}, ("behaviors", "B"))
    assert problems == ["behaviors.B: reward_signals.extrinsic.normalize is for ppo and poca; remove it for sac"]
