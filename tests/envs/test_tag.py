"""Tag: specs of both teams, symmetric win/loss rewards, terminated vs interrupted episodes, and that
the game is fair (random vs random) and learnable (walking to the flag beats random)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple

from ml_arl.envs.games.builtin import BUILTIN_ENVS
from ml_arl.envs.games.tag import HALF_CELLS, TEAMS, Tag

Policy = Callable[[np.ndarray], np.ndarray]


def walk_to_flag(obs: np.ndarray) -> np.ndarray:
    return np.array([1, 0, 2], np.int32)[np.sign(obs[:, 2]).astype(int) + 1]  # left, stay, right


def random_policy(seed: int) -> Policy:
    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(0, 3, len(obs)).astype(np.int32)


def act(env: Tag, team: int, action: np.ndarray) -> None:
    env.set_actions(TEAMS[team], ActionTuple(discrete=action.reshape(-1, 1)))


def play(policies: tuple[Policy, Policy], games: int, seed: int = 0, num_areas: int = 32) -> np.ndarray:
    """Final rewards of team 0 over ``games`` finished episodes (timeouts count as 0)."""
    env = Tag(seed=seed, num_areas=num_areas)
    env.reset()
    results: list[float] = []
    while len(results) < games:
        for team in range(2):
            act(env, team, policies[team](env.get_steps(TEAMS[team])[0].obs[0]))
        env.step()
        term0, term1 = env.get_steps(TEAMS[0])[1], env.get_steps(TEAMS[1])[1]
        np.testing.assert_array_equal(term0.reward, -term1.reward)
        results.extend(term0.reward.tolist())
    return np.array(results[:games])


def test_specs_and_registry() -> None:
    env = BUILTIN_ENVS["Tag"](seed=0, num_areas=4)
    assert isinstance(env, Tag)
    specs = env.behavior_specs
    assert list(specs) == ["Tag?team=0", "Tag?team=1"]
    for name in TEAMS:
        assert specs[name].observation_specs[0].shape == (3,)
        assert specs[name].action_spec.continuous_size == 0
        assert specs[name].action_spec.discrete_branches == (3,)
    env.reset()
    d0, t0 = env.get_steps(TEAMS[0])
    d1, t1 = env.get_steps(TEAMS[1])
    assert len(d0) == len(d1) == 4 and len(t0) == len(t1) == 0
    assert not set(d0.agent_id.tolist()) & set(d1.agent_id.tolist())
    # Own perspective: the opponent offset is mirrored, the flag seen from each agent.
    np.testing.assert_allclose(d0.obs[0][:, 1], -d1.obs[0][:, 1])
    np.testing.assert_allclose(d0.obs[0][:, 0] + d0.obs[0][:, 2], d1.obs[0][:, 0] + d1.obs[0][:, 2])
    assert np.all(np.abs(d0.obs[0][:, 2]) >= 3 / HALF_CELLS - 1e-6)
    with pytest.raises(ValueError, match="no environment parameters"):
        env.set_environment_parameters({"speed": 1.0})
    env.set_environment_parameters({})
    with pytest.raises(KeyError):
        env.get_steps("Tag")


def test_win_loss_draw_and_timeout() -> None:
    env = Tag(seed=1, num_areas=3, max_episode_steps=30)
    env.reset()
    # Arena 0: team 0 one cell left of the flag, team 1 far away -> team 0 wins.
    # Arena 1: both one cell from the flag -> draw. Arena 2: both far -> runs on.
    env.flag[:] = 0
    env.pos[:, 0] = [-1, 5]
    env.pos[:, 1] = [-1, 1]
    env.pos[:, 2] = [-6, 6]
    right, left, stay = np.full(3, 2), np.full(3, 1), np.zeros(3, int)
    act(env, 0, right)
    act(env, 1, np.array([0, 1, 0]))
    env.step()
    (d0, t0), (d1, t1) = env.get_steps(TEAMS[0]), env.get_steps(TEAMS[1])
    assert t0.agent_id.tolist() == [0, 1] and t1.agent_id.tolist() == [3, 4]
    np.testing.assert_array_equal(t0.reward, [1.0, 0.0])
    np.testing.assert_array_equal(t1.reward, [-1.0, 0.0])
    assert not t0.interrupted.any() and not t1.interrupted.any()
    # The finished arenas started over in the same step: all agents decide again, reward 0.
    assert len(d0) == len(d1) == 3
    np.testing.assert_array_equal(d0.reward, 0.0)
    # Team 1 wins symmetrically.
    env.flag[0], env.pos[:, 0] = 0, [7, 1]
    act(env, 0, stay)
    act(env, 1, left)
    env.step()
    _, t0 = env.get_steps(TEAMS[0])
    _, t1 = env.get_steps(TEAMS[1])
    assert 0 in t0.agent_id.tolist()
    assert t0.reward[t0.agent_id.tolist().index(0)] == -1.0 and t1.reward[t1.agent_id.tolist().index(3)] == 1.0
    # Nobody moves: every arena times out at step 30, interrupted, reward 0.
    env.reset()
    for step in range(1, 31):
        env.step()  # no actions set = stay
        _, t0 = env.get_steps(TEAMS[0])
        _, t1 = env.get_steps(TEAMS[1])
        if step < 30:
            assert len(t0) == 0
    assert len(t0) == len(t1) == 3 and t0.interrupted.all() and t1.interrupted.all()
    np.testing.assert_array_equal(t0.reward, 0.0)


def test_walk_to_flag_beats_random_and_random_is_fair() -> None:
    greedy = play((walk_to_flag, random_policy(1)), 400)
    assert (greedy == 1).mean() >= 0.9
    assert (greedy == -1).sum() >= 1  # the random opponent does win now and then
    mirrored = play((random_policy(2), walk_to_flag), 400, seed=1)
    assert (mirrored == -1).mean() >= 0.9
    both_random = play((random_policy(3), random_policy(4)), 400, seed=2)
    wins0, wins1 = (both_random == 1).sum(), (both_random == -1).sum()
    assert wins0 + wins1 >= 100
    assert 0.35 <= wins0 / (wins0 + wins1) <= 0.65


def test_set_action_for_agent_and_determinism() -> None:
    def trace(seed: int) -> np.ndarray:
        env = Tag(seed=seed, num_areas=4)
        env.reset()
        rng = np.random.default_rng(0)
        out = []
        for _ in range(60):
            act(env, 0, rng.integers(0, 3, 4))
            env.set_action_for_agent(TEAMS[1], 5, ActionTuple(discrete=np.array([[2]])))
            env.step()
            out.append(np.concatenate([env.get_steps(team)[0].obs[0].ravel() for team in TEAMS]))
        return np.array(out)

    np.testing.assert_array_equal(trace(3), trace(3))
    assert not np.array_equal(trace(3), trace(4))
