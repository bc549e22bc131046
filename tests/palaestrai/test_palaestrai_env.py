"""PalaestraiEnv (ml_arl.palaestrai.env) driven directly, as a worker drives it: one behavior per
agent with its observation and actions from its whitelists; Vanilla (every agent decides every
step) on palaestrAI's DummyEnvironment, TakingTurns (one agent per step, each rewarded for its own
move) on two-player tic-tac-toe; palaestrAI Objectives (DummyObjective and a user-written one, on
a palaestrAI Memory) through objective_of; a user-written Environment with Box sensors and a Box
actuator (tests/support/palaestrai_envs.py), sync and async."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

import numpy as np
import pytest
from mlagents_envs.base_env import ActionTuple
from palaestrai.agent import Objective

from ml_arl.core.exceptions import ConfigError
from ml_arl.palaestrai.definitions import PHASE_PARAMETER, AgentWiring, EnvironmentSpec, PluginSpec
from ml_arl.palaestrai.env import PalaestraiEnv

DUMMY_ENV = "palaestrai.environment:DummyEnvironment"
DUMMY_OBJECTIVE = PluginSpec("palaestrai.agent:DummyObjective", {})
TICTACTOE = "palaestrai_environments.tictactoe:TicTacToeEnvironment"
ECHO = "tests.support.palaestrai_envs:EchoEnvironment"


class NegatedRewards(Objective):
    """A user's objective: minus ``scale`` times the sum of the latest rewards, and -100 more at an
    episode's end; it keeps what it saw of the memory in ``SEEN``."""

    SEEN: list[dict[str, Any]] = []

    def __init__(self, scale: float = 1.0):
        super().__init__({"scale": scale})
        self.scale = float(scale)

    def internal_reward(self, memory: Any, **kwargs: Any) -> float:
        shard = memory.tail(1)
        done = bool(np.asarray(shard.dones).reshape(-1)[-1])
        NegatedRewards.SEEN.append({
            "rows": len(memory), "reward_columns": list(shard.rewards.columns),
            "sensor_columns": list(shard.sensor_readings.columns), "actuator_columns": list(shard.actuator_setpoints.columns),
            "done": done,
        })
        return -self.scale * float(shard.rewards.sum(axis=1).iloc[0]) - (100.0 if done else 0.0)


class Silent(Objective):
    """An objective with nothing to say (None counts 0)."""

    def __init__(self) -> None:
        super().__init__({})

    def internal_reward(self, memory: Any, **kwargs: Any) -> None:
        return None


def dummy_spec(max_iter: int = 4) -> EnvironmentSpec:
    return EnvironmentSpec(DUMMY_ENV, "myenv", {"discrete": True, "max_iter": max_iter})


def ids(*numbers: int) -> tuple[str, ...]:
    return tuple(f"myenv.{i}" for i in numbers)


@pytest.fixture
def envs() -> Iterator[list[PalaestraiEnv]]:
    """Environments a test made: closed at its end."""
    made: list[PalaestraiEnv] = []
    yield made
    for env in made:
        env.close()


def make(envs: list[PalaestraiEnv], environments: list[EnvironmentSpec], agents: list[AgentWiring],
         taking_turns: bool = False) -> PalaestraiEnv:
    env = PalaestraiEnv(environments, agents, taking_turns, seed=3)
    envs.append(env)
    return env


def deciding(env: PalaestraiEnv) -> list[str]:
    return [name for name in env.behavior_specs if len(env.get_steps(name)[0])]


def discrete_action(branches: int, value: int = 0) -> ActionTuple:
    return ActionTuple(discrete=np.full((1, branches), value, np.int32))


# -- the behaviors ----------------------------------------------------------------------------------

def test_each_agent_is_a_behavior_laid_out_from_its_whitelists(envs: list[PalaestraiEnv]) -> None:
    env = make(envs, [dummy_spec(max_iter=10)], [
        AgentWiring("defender", ids(0, 1, 2, 3, 4), ids(0, 1, 2, 3, 4)),
        AgentWiring("attacker", ids(9, 5), ids(5, 6)),
    ])
    specs = env.behavior_specs
    assert list(specs) == ["defender", "attacker"]
    assert specs["defender"].observation_specs[0].shape == (5 * 11,)  # five Discrete(11) one-hots
    assert specs["defender"].action_spec.continuous_size == 0
    assert specs["defender"].action_spec.discrete_branches == (100,) * 5  # five Discrete(100) actuators
    assert specs["attacker"].observation_specs[0].shape == (2 * 11,)
    assert specs["attacker"].action_spec.discrete_branches == (100, 100)
    sensors, actuators = env.sensor_and_actuator_ids()
    assert sorted(sensors) == sorted(f"myenv.{i}" for i in range(10)) and sorted(actuators) == sorted(sensors)


def test_a_sensor_the_environment_lacks_names_the_closest(envs: list[PalaestraiEnv]) -> None:
    with pytest.raises(ConfigError, match=r"agent .a.: the environment has no sensor 'myenv\.x3'; did you mean 'myenv\.3'\?"):
        make(envs, [dummy_spec()], [AgentWiring("a", ("myenv.x3",), ids(0))])


# -- Vanilla ----------------------------------------------------------------------------------------

def test_vanilla_every_agent_decides_every_step_and_both_see_the_episode_end(envs: list[PalaestraiEnv]) -> None:
    """DummyEnvironment with max_iter 4: rewards 1, 2, 3, then 0 at the 4th update, which is done."""
    env = make(envs, [dummy_spec(max_iter=4)], [
        AgentWiring("a", ids(0, 1), ids(0), DUMMY_OBJECTIVE),
        AgentWiring("b", ids(5), ids(5, 6), DUMMY_OBJECTIVE),
    ])
    for episode in range(2):
        for step in range(4):
            assert deciding(env) == ["a", "b"]
            for name, branches in (("a", 1), ("b", 2)):
                decision, terminal = env.get_steps(name)
                assert len(terminal) == (1 if episode and not step else 0)  # the last episode's end comes with the first step
                assert decision.reward.tolist() == [float(step)]  # the reward of the update before (0 at the start)
                assert env.objective_of(name, terminal=False) == float(step)  # DummyObjective: the sum of the last rewards
                one_hot = decision.obs[0].reshape(-1, 5)  # Discrete(5) sensors, value = updates so far
                assert one_hot.argmax(axis=1).tolist() == [step] * one_hot.shape[0]
                env.set_actions(name, discrete_action(branches, 7))
            env.step()
        for name in ("a", "b"):
            decision, terminal = env.get_steps(name)
            assert len(terminal) == 1, (episode, name)
            assert terminal.reward.tolist() == [0.0] and terminal.interrupted.tolist() == [False]
            assert env.objective_of(name, terminal=True) == 0.0
            assert len(decision) == 1 and decision.reward.tolist() == [0.0]  # the next episode's first decision


def test_the_objective_of_a_terminal_step_is_the_objectives_last_value(envs: list[PalaestraiEnv]) -> None:
    NegatedRewards.SEEN.clear()
    scaled = PluginSpec(f"{__name__}:NegatedRewards", {"scale": 2.0})
    env = make(envs, [dummy_spec(max_iter=3)], [
        AgentWiring("a", ids(0, 1), ids(0), scaled),
        AgentWiring("b", ids(5), ids(5), PluginSpec(f"{__name__}:Silent", {})),
    ])
    seen = []
    for _ in range(3):
        env.step()
        seen.append((env.objective_of("a", terminal=False), env.objective_of("b", terminal=False)))
    assert seen[:2] == [(-2.0, 0.0), (-4.0, 0.0)]  # rewards 1 and 2, scaled and negated; None counts 0
    assert env.objective_of("a", terminal=True) == -100.0  # reward 0 at the end, and done
    assert env.objective_of("b", terminal=True) == 0.0
    assert [s["done"] for s in NegatedRewards.SEEN] == [False, False, True]
    assert [s["rows"] for s in NegatedRewards.SEEN] == [1, 2, 3]  # one memory row per closed transition
    first = NegatedRewards.SEEN[0]
    assert first["reward_columns"] == ["Dummy Reward"]  # the environment's reward ids, unprefixed, as palaestrAI's
    assert first["sensor_columns"] == ["myenv.0", "myenv.1"]  # only its own sensors
    assert first["actuator_columns"] == ["myenv.0"]


# -- TakingTurns ------------------------------------------------------------------------------------

TILES = tuple(f"ttt.Tile {r}-{c}" for r in (1, 2, 3) for c in (1, 2, 3))


def test_taking_turns_one_agent_decides_per_step_and_gets_its_own_moves_reward(envs: list[PalaestraiEnv]) -> None:
    """Two-player tic-tac-toe: x plays 0, o plays 0 (occupied: -100), x plays 1, o plays 3, x plays 2
    and wins (+10). Each reward is that of the update the agent's own move caused."""
    env = make(envs, [EnvironmentSpec(TICTACTOE, "ttt", {"twoplayer": True})], [
        AgentWiring("x", TILES, ("ttt.Field selector",), DUMMY_OBJECTIVE),
        AgentWiring("o", TILES, ("ttt.Field selector",), DUMMY_OBJECTIVE),
    ], taking_turns=True)
    assert env.behavior_specs["x"].action_spec.discrete_branches == (9,)
    moves = [("x", 0, 0.0), ("o", 0, 0.0), ("x", 1, 1.0), ("o", 3, -100.0), ("x", 2, 1.0)]
    boards = []
    for mover, tile, reward in moves:
        assert deciding(env) == [mover]
        decision, terminal = env.get_steps(mover)
        assert len(terminal) == 0
        assert decision.reward.tolist() == [reward], mover
        assert env.objective_of(mover, terminal=False) == reward
        boards.append(decision.obs[0].reshape(9, 3).argmax(axis=1).tolist())  # Discrete(3) per tile
        env.set_actions(mover, discrete_action(1, tile))
        env.step()
    assert boards[1][0] == 2 and boards[3][:2] == [2, 2] and boards[4][3] == 1  # o sees x's moves, x sees o's
    x_decision, x_terminal = env.get_steps("x")
    o_decision, o_terminal = env.get_steps("o")
    assert x_terminal.reward.tolist() == [10.0] and env.objective_of("x", terminal=True) == 10.0  # x's winning move
    assert o_terminal.reward.tolist() == [1.0] and env.objective_of("o", terminal=True) == 1.0  # o's own last move (tile 3)
    assert len(x_decision) == 1 and len(o_decision) == 0  # a new game: x moves first again
    assert x_decision.obs[0].reshape(9, 3).argmax(axis=1).tolist() == [0] * 9


def test_taking_turns_with_an_invalid_move_limit_ends_the_game_for_both(envs: list[PalaestraiEnv]) -> None:
    env = make(envs, [EnvironmentSpec(TICTACTOE, "ttt", {"twoplayer": True, "invalid_turn_limit": 2})], [
        AgentWiring("x", TILES, ("ttt.Field selector",)),
        AgentWiring("o", TILES, ("ttt.Field selector",)),
    ], taking_turns=True)
    for mover in ("x", "o", "x"):  # x plays 4, o plays 4 (invalid), x plays 4 (invalid: the second in a row, -1000)
        assert deciding(env) == [mover]
        env.set_actions(mover, discrete_action(1, 4))
        env.step()
    assert env.get_steps("x")[1].reward.tolist() == [-1000.0]
    assert env.get_steps("o")[1].reward.tolist() == [-100.0]


# -- a user-written Environment ---------------------------------------------------------------------

def echo_agent(objective: Optional[PluginSpec] = None) -> AgentWiring:
    return AgentWiring("pilot", ("echo.position", "echo.echo"), ("echo.force",), objective)


@pytest.mark.parametrize("name", [ECHO, "tests.support.palaestrai_envs:AsyncEchoEnvironment"])
def test_a_user_environment_with_box_sensors_and_a_box_actuator(envs: list[PalaestraiEnv], name: str) -> None:
    env = make(envs, [EnvironmentSpec(name, "echo", {"max_iter": 2})], [echo_agent()])
    spec = env.behavior_specs["pilot"]
    assert spec.observation_specs[0].shape == (4,)
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.discrete_branches == ()
    decision, _ = env.get_steps("pilot")
    assert decision.obs[0].tolist() == [[0.0, 0.0, 0.0, 0.0]]
    env.set_actions("pilot", ActionTuple(continuous=np.array([[0.5, -1.0]], np.float32)))
    env.step()
    decision, terminal = env.get_steps("pilot")
    assert len(terminal) == 0
    # [-1, 1] onto the actuator's [-2, 2]: force (1, -2), as the environment received it (its echo);
    # the position moved by force / 4; the reward is the force's sum
    assert decision.obs[0].tolist() == [[0.25, -0.5, 1.0, -2.0]]
    assert decision.reward.tolist() == [-1.0]
    env.set_actions("pilot", ActionTuple(continuous=np.array([[1.0, 1.0]], np.float32)))
    env.step()
    decision, terminal = env.get_steps("pilot")
    assert terminal.reward.tolist() == [4.0] and terminal.interrupted.tolist() == [False]  # terminated
    assert terminal.obs[0].tolist() == [[0.75, 0.0, 2.0, 2.0]]
    assert decision.obs[0].tolist() == [[0.0, 0.0, 0.0, 0.0]]  # the next episode starts afresh


def test_a_truncated_episode_ends_interrupted(envs: list[PalaestraiEnv]) -> None:
    env = make(envs, [EnvironmentSpec(ECHO, "echo", {"max_iter": 1, "truncate": True})], [echo_agent()])
    env.step()  # no action set: the actuator gets the middle of its range
    decision, terminal = env.get_steps("pilot")
    assert terminal.interrupted.tolist() == [True]
    assert terminal.obs[0].tolist() == [[0.0, 0.0, 0.0, 0.0]] and terminal.reward.tolist() == [0.0]


def test_a_user_objective_on_a_user_environment(envs: list[PalaestraiEnv]) -> None:
    NegatedRewards.SEEN.clear()
    env = make(envs, [EnvironmentSpec(ECHO, "echo", {"max_iter": 2})],
               [echo_agent(PluginSpec(f"{__name__}:NegatedRewards", {}))])
    env.set_actions("pilot", ActionTuple(continuous=np.array([[1.0, 0.0]], np.float32)))
    env.step()
    assert env.objective_of("pilot", terminal=False) == -2.0  # force (2, 0)
    env.set_actions("pilot", ActionTuple(continuous=np.array([[-1.0, -1.0]], np.float32)))
    env.step()
    assert env.objective_of("pilot", terminal=True) == 4.0 - 100.0  # force (-2, -2), and done
    assert NegatedRewards.SEEN[0]["reward_columns"] == ["echo reward"]
    assert NegatedRewards.SEEN[0]["sensor_columns"] == ["echo.position", "echo.echo"]


def test_a_phase_parameter_switches_to_that_phases_environment_at_the_next_reset(envs: list[PalaestraiEnv]) -> None:
    env = make(envs, [EnvironmentSpec(ECHO, "echo", {"max_iter": 1}), EnvironmentSpec(ECHO, "echo", {"max_iter": 3})],
               [echo_agent()])
    env.step()
    assert len(env.get_steps("pilot")[1]) == 1  # phase 0: one update an episode
    env.set_environment_parameters({PHASE_PARAMETER: 1})
    env.reset()
    lengths = []
    for _ in range(3):
        env.step()
        lengths.append(len(env.get_steps("pilot")[1]))
    assert lengths == [0, 0, 1]  # phase 1: three updates an episode


# -- AgentObjectiveTerminationCondition's brain_avgN -----------------------------------------------

def test_brain_avg_ends_the_episode_as_a_terminal_state(envs: list[PalaestraiEnv]) -> None:
    """brain_avg2: 2.5 on DummyObjective (objectives 1, 2, 3, ...): the episode ends, terminal, the
    next starts afresh."""
    env = make(envs, [dummy_spec(max_iter=10)], [AgentWiring("a", ids(0), ids(0), DUMMY_OBJECTIVE, (2, 2.5))])
    ends = []
    for _ in range(8):
        env.step()
        terminal = env.get_steps("a")[1]
        ends.append(bool(len(terminal)) and not bool(terminal.interrupted[0]))
    assert ends.count(True) >= 1 and ends.index(True) <= 3


def test_brain_avg_ends_the_episode_with_the_update_that_reached_it(envs: list[PalaestraiEnv]) -> None:
    env = make(envs, [dummy_spec(max_iter=10)], [AgentWiring("a", ids(0), ids(0), DUMMY_OBJECTIVE, (2, 2.5))])
    for _ in range(3):  # objectives 1, 2, 3: the mean of the last two reaches 2.5 with the 3rd update
        env.step()
    _, terminal = env.get_steps("a")
    assert len(terminal) == 1 and terminal.reward.tolist() == [3.0]
    assert env.objective_of("a", terminal=True) == 3.0
