"""Environment sources: gymnasium wrapping (names, terminated vs truncated, spaces), built-in
Reach semantics, and user factories (module:attr, kwargs, cloudpickle)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import cloudpickle
import gymnasium
import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from ml_arl.core.exceptions import EnvironmentSourceError
from ml_arl.envs.adapters.gym_env import GymnasiumEnv, behavior_name_for, make_gymnasium_env
from ml_arl.envs.games.builtin import Reach
from ml_arl.envs.sources import parse_env_args, resolve_env


def test_behavior_names_drop_the_version() -> None:
    assert behavior_name_for("CartPole-v1") == "CartPole"
    assert behavior_name_for("ALE/Pong-v5") == "Pong"
    assert behavior_name_for("MyEnv") == "MyEnv"


def step_until_done(env: GymnasiumEnv, action: ActionTuple, limit: int = 1000) -> tuple:
    name = env.behavior_name
    for _ in range(limit):
        env.set_actions(name, action)
        env.step()
        decision, terminal = env.get_steps(name)
        if len(terminal):
            return decision, terminal
    raise AssertionError("episode did not end")


def test_truncated_is_interrupted_and_terminated_is_not() -> None:
    env = GymnasiumEnv(gymnasium.make("CartPole-v1", max_episode_steps=5), "CartPole", seed=0)
    env.reset()
    _, terminal = step_until_done(env, ActionTuple(discrete=np.array([[0]])))
    assert terminal.interrupted[0] and env.get_steps("CartPole")[0].obs[0].shape == (1, 4)
    env = GymnasiumEnv(gymnasium.make("CartPole-v1"), "CartPole", seed=0)
    env.reset()
    decision, terminal = step_until_done(env, ActionTuple(discrete=np.array([[0]])))  # always push left: falls
    assert not terminal.interrupted[0] and terminal.reward[0] == 1.0
    assert len(decision) == 1 and decision.reward[0] == 0.0  # auto-reset: a fresh episode is waiting


def test_box_actions_map_onto_the_bounds() -> None:
    env = make_gymnasium_env("Pendulum-v1", seed=0)
    spec = env.behavior_specs["Pendulum"]
    assert spec.action_spec.continuous_size == 1 and spec.observation_specs[0].shape == (3,)
    assert env._to_env_action(ActionTuple(continuous=np.array([[1.0]], np.float32)))[0] == pytest.approx(2.0)
    assert env._to_env_action(ActionTuple(continuous=np.array([[-1.0]], np.float32)))[0] == pytest.approx(-2.0)
    assert env._to_env_action(ActionTuple(continuous=np.array([[0.0]], np.float32)))[0] == pytest.approx(0.0)


def test_discrete_observations_are_one_hot() -> None:
    env = make_gymnasium_env("FrozenLake-v1", seed=0)
    env.reset()
    obs = env.get_steps("FrozenLake")[0].obs[0]
    assert obs.shape == (1, 16) and obs.sum() == 1.0 and obs[0, 0] == 1.0


def test_reach_masks_walls_and_rewards_the_goal() -> None:
    env = Reach("discrete", n_agents=2, seed=0)
    env.reset()
    env.pos[:] = [-1.0, 1.0]
    mask = env._masks()[0]
    assert mask[0].tolist() == [True, False, False] and mask[1].tolist() == [False, False, True]
    env.pos[:] = [0.0, 0.0]
    env.goal[:] = [0.2, -0.6]
    env.set_actions("ReachDiscrete", ActionTuple(discrete=np.array([[2], [1]])))
    env.step()
    decision, terminal = env.get_steps("ReachDiscrete")
    assert terminal.agent_id.tolist() == [0] and terminal.reward[0] == 1.0 and not terminal.interrupted[0]
    assert decision.agent_id.tolist() == [0, 1] and decision.reward.tolist() == pytest.approx([0.0, -0.01])


def make_counting_env(worker_id: int, seed: int, n_agents: int = 2) -> Reach:
    env = Reach("continuous", n_agents=n_agents, seed=seed)
    env.made_by = (worker_id, seed)  # type: ignore[attr-defined]
    return env


def test_module_factory_gets_worker_id_seed_and_env_args() -> None:
    factory = resolve_env("tests.envs.test_envs:make_counting_env", ["n_agents=3"])
    env = cloudpickle.loads(cloudpickle.dumps(factory))(worker_id=2, seed=9)
    assert env.made_by == (2, 9) and env.n_agents == 3


def not_an_env() -> str:
    return "surprise"


def test_factory_returning_a_non_env_is_reported() -> None:
    factory = resolve_env("tests.envs.test_envs:not_an_env")
    with pytest.raises(TypeError, match="expected an mlagents_envs.base_env.BaseEnv"):
        factory(worker_id=0, seed=0)


def test_env_args_parsing() -> None:
    assert parse_env_args(["n=3", "name=abc", "--flag=true", "x=1.5"]) == {"n": 3, "name": "abc", "flag": True, "x": 1.5}
    with pytest.raises(EnvironmentSourceError, match="not key=value"):
        parse_env_args(["oops"])


@pytest.mark.parametrize("source", [None, "./Ball.x86_64", "builds/Ball", "Ball.x86_64:x"])
def test_unity_sources_are_not_python_sources(source: str | None) -> None:
    from ml_arl.envs.sources import is_python_source

    assert not is_python_source(source)
    with pytest.raises(EnvironmentSourceError, match="not a Python environment"):
        resolve_env(source)


def test_num_areas_steps_gymnasium_copies_as_agents() -> None:
    env = make_gymnasium_env("CartPole-v1", seed=3, num_areas=3, max_episode_steps=20)
    env.reset()
    decision, terminal = env.get_steps("CartPole")
    assert decision.obs[0].shape == (3, 4) and decision.agent_id.tolist() == [0, 1, 2] and len(terminal) == 0
    assert len({tuple(row) for row in decision.obs[0]}) == 3  # each copy has its own seed
    again = make_gymnasium_env("CartPole-v1", seed=3, num_areas=3)
    again.reset()
    np.testing.assert_array_equal(again.get_steps("CartPole")[0].obs[0], decision.obs[0])  # and it is reproducible
    # Copy 1 always pushes left and falls first; the others alternate and keep going.
    seen_terminal = None
    for t in range(20):
        actions = np.array([[t % 2], [0], [(t + 1) % 2]])
        env.set_actions("CartPole", ActionTuple(discrete=actions))
        env.step()
        decision, terminal = env.get_steps("CartPole")
        if len(terminal):
            seen_terminal = (decision, terminal)
            break
    assert seen_terminal is not None
    decision, terminal = seen_terminal
    assert terminal.agent_id.tolist() == [1] and not terminal.interrupted[0] and terminal.reward[0] == 1.0
    assert decision.agent_id.tolist() == [0, 1, 2] and decision.reward.tolist() == [1.0, 0.0, 1.0]
    assert np.all(np.abs(decision.obs[0][1]) <= 0.05)  # copy 1 starts a fresh episode


def test_num_areas_multiplies_builtin_agents_and_reaches_factories() -> None:
    env = resolve_env("builtin:ReachDiscrete", num_areas=2)(worker_id=0, seed=0)
    env.reset()
    assert len(env.get_steps("ReachDiscrete")[0]) == 8  # 4 agents per area
    env = resolve_env("tests.envs.test_envs:make_area_env", num_areas=3)(worker_id=0, seed=0)
    assert env.n_agents == 6
    with pytest.raises(EnvironmentSourceError, match="env_settings.num_areas: 2, but tests.envs.test_envs:make_counting_env takes no num_areas"):
        resolve_env("tests.envs.test_envs:make_counting_env", num_areas=2)


def make_area_env(seed: int, num_areas: int) -> Reach:
    return Reach("continuous", n_agents=2, seed=seed, num_areas=num_areas)


def make_niceness_probe(seed: int, out: str) -> Reach:
    with open(out, "w") as f:
        f.write(str(os.nice(0)))
    return Reach("continuous", seed=seed)


def test_worker_nice_lowers_the_priority_of_workers(tmp_path: Path) -> None:
    from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
    from ml_arl.settings import EnvSettings

    out = tmp_path / "nice.txt"
    settings = EnvSettings(env_path="tests.envs.test_envs:make_niceness_probe", env_args=[f"out={out}"], worker_nice=7)
    manager = SubprocessEnvManager(resolve_env(settings.env_path, settings.env_args), settings, 0)
    try:
        assert "Reach" in manager.start()
    finally:
        manager.close()
    assert int(out.read_text()) == min(19, os.nice(0) + 7)


def _stepping_manager(**settings: Any) -> tuple[Any, Any]:
    from ml_arl.core.actor_weights import PolicyMessage
    from ml_arl.envs.backends.subprocess_env_manager import SubprocessEnvManager
    from ml_arl.networks.actor_critic import ActorCritic
    from ml_arl.settings import EnvSettings, NetworkSettings

    env_settings = EnvSettings(num_envs=2, env_path="builtin:Trivial", timeout_wait=30, **settings)
    manager = SubprocessEnvManager(resolve_env(env_settings.env_path, env_settings.env_args), env_settings, 0)
    spec = manager.start()["Trivial"]
    weights = ActorCritic(spec, NetworkSettings(hidden_units=16)).muscle_weights()
    manager.set_policy("Trivial", PolicyMessage(1, weights, 16, False))
    return manager, weights


def test_deterministic_stepping_answers_one_request_per_worker_in_worker_order() -> None:
    manager, _ = _stepping_manager(steps_per_message=4, deterministic=True, seed=3)
    try:
        for _ in range(5):
            batches = manager.step()
            assert [b.worker_id for b in batches] == [0, 1]
            assert all(not w.sent for w in manager.workers)
    finally:
        manager.close()


class _Sloppy:
    """A user muscle that forgot part of the contract (ml_arl.acting.muscle.Acting)."""

    memory_size = 8

    def __init__(self, weights: object, deterministic: bool, seed: int):
        self.branches = ()

    def act(self, obs: list[np.ndarray], allowed: object) -> None:
        return None


def test_a_user_muscle_missing_part_of_the_contract_is_named() -> None:
    from ml_arl.acting.env_runner import build_muscle

    with pytest.raises(TypeError, match=r"^muscle tests.envs.test_envs:_Sloppy: has no set_weights, forget \(it has a memory_size\); see ml_arl.acting.muscle.Acting$"):
        build_muscle("tests.envs.test_envs:_Sloppy", None, False, 0)
    muscle, recurrent = build_muscle("tests.support.plugins:GoalExpertMuscle", {"n_cont": 1, "branches": []}, True, 0)
    assert not recurrent and muscle.branches == ()


class _Pixels(gymnasium.Env):  # type: ignore[misc]
    """A gymnasium env with an image observation (uint8, H x W x C) and two actions."""

    observation_space = gymnasium.spaces.Box(0, 255, (8, 6, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[np.ndarray, dict]:
        return np.full((8, 6, 3), 255, np.uint8), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.full((8, 6, 3), 51 * (int(action) + 1), np.uint8), 1.0, bool(action), False, {}


def test_gymnasium_image_observations_share_pettingzoos_codec() -> None:
    env = GymnasiumEnv([_Pixels(), _Pixels()], "Pixels", seed=0)
    spec = env.behavior_specs["Pixels"]
    assert spec.observation_specs[0].shape == (8, 6, 3) and spec.action_spec.discrete_branches == (2,)
    env.reset()
    decision, _ = env.get_steps("Pixels")
    assert decision.obs[0].shape == (2, 8, 6, 3) and float(decision.obs[0].max()) == 1.0  # scaled to [0, 1]
    env.set_actions("Pixels", ActionTuple(discrete=np.array([[0], [1]], np.int32)))
    env.step()
    decision, terminal = env.get_steps("Pixels")
    assert terminal.agent_id.tolist() == [1] and float(terminal.obs[0][0, 0, 0, 0]) == pytest.approx(0.4)
    assert float(decision.obs[0][0, 0, 0, 0]) == pytest.approx(0.2)
