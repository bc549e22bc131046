"""ml_arl.make_vec_env: arl-learn's workers as a gymnasium vector environment. Spaces and shapes,
same-step autoreset with the final observation in infos, rewards as the task gives them, the
in-process and subprocess managers, tuple spaces of a hybrid behavior, a crashing worker restarted
within its quota (its sub-environments come back truncated), and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

import ml_arl
from ml_arl.core.exceptions import RestartQuotaExceeded

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("manager", ["subprocess", "inprocess"])
def test_cartpole_steps_and_resets_itself_in_the_step_that_ends_an_episode(manager: str) -> None:
    config = {"env_settings": {"env_path": "gymnasium:CartPole-v1", "num_envs": 3, "seed": 1, "manager": manager}}
    env = ml_arl.make_vec_env(config)
    try:
        assert env.num_envs == 3
        assert env.single_observation_space == spaces.Box(-np.inf, np.inf, (4,), np.float32)
        assert isinstance(env.single_action_space, spaces.Discrete) and env.single_action_space.n == 2
        obs, infos = env.reset()
        assert obs.shape == (3, 4) and obs.dtype == np.float32 and np.all(np.abs(obs) <= 0.05)
        assert "action_mask" not in infos  # CartPole gives none
        ended = 0
        for _ in range(200):
            obs, rewards, terminated, truncated, infos = env.step(np.ones(3, np.int64))  # always push right: falls fast
            assert obs.shape == (3, 4)
            np.testing.assert_array_equal(rewards, np.ones(3, np.float32))
            done = terminated | truncated
            if done.any():
                ended += int(done.sum())
                np.testing.assert_array_equal(infos["_final_obs"], done)
                for i in np.flatnonzero(done):
                    final = infos["final_obs"][i]
                    assert abs(final[2]) > 0.2 or abs(final[0]) > 2.4  # the pole fell or the cart left
                    assert np.all(np.abs(obs[i]) <= 0.05)  # the next episode's first observation
        assert ended >= 15 and not truncated.any()
    finally:
        env.close()


def test_a_hybrid_behavior_has_tuple_spaces_and_its_rewards() -> None:
    env = ml_arl.make_vec_env("builtin:ReachHybrid", num_envs=2)
    try:
        assert isinstance(env.single_action_space, spaces.Tuple)
        cont, disc = env.single_action_space.spaces
        assert isinstance(cont, spaces.Box) and cont.shape[0] >= 1 and isinstance(disc, (spaces.Discrete, spaces.MultiDiscrete))
        obs, _ = env.reset()
        assert obs.shape[0] == env.num_envs and env.num_envs % 2 == 0  # every agent of both workers
        action = env.action_space.sample()
        obs, rewards, terminated, truncated, _ = env.step(action)
        assert rewards.shape == (env.num_envs,) and np.all(np.isfinite(rewards))
    finally:
        env.close()


def test_a_crashing_worker_is_restarted_and_its_sub_environments_come_back_truncated(tmp_path: Path) -> None:
    env = ml_arl.make_vec_env(
        "tests.support.fault_envs:make_env", num_envs=2, seed=3,
        env_args=["fault=unity", "at_step=5", "only_worker=1", "lives=[1]", f"state_dir={tmp_path}"],
    )
    try:
        per_worker = env.num_envs // 2
        env.reset()
        restarted_at = None
        for step in range(12):
            _, _, _, truncated, infos = env.step(env.action_space.sample())
            if "restarted" in infos:
                restarted_at = step
                np.testing.assert_array_equal(infos["restarted"], [False] * per_worker + [True] * per_worker)
                assert truncated[per_worker:].all()
        assert restarted_at is not None
    finally:
        env.close()


def test_beyond_the_quota_the_failure_is_raised(tmp_path: Path) -> None:
    env = ml_arl.make_vec_env(
        "tests.support.fault_envs:make_env", num_envs=1, seed=3, max_lifetime_restarts=0,
        env_args=["fault=unity", "at_step=3"],
    )
    try:
        env.reset()
        with pytest.raises(RestartQuotaExceeded):
            for _ in range(6):
                env.step(env.action_space.sample())
    finally:
        env.close()


def test_a_behavior_the_environment_lacks_is_one_line() -> None:
    with pytest.raises(ValueError, match="no behavior 'Nope'; it has Reach"):
        ml_arl.make_vec_env("builtin:Reach", num_envs=1, behavior="Nope")
