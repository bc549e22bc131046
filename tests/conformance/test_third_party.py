"""Environments written elsewhere, unchanged, with the default subprocess workers: every
Gymnasium classic-control and MuJoCo task (the newest version of each), every PettingZoo classic
game and MPE game its registries list, Grid2Op's sandbox, and every environment of
palaestrai-environments through a palaestrAI run file. Each trains, then tests; the episodes of
both phases are in the store; no traceback; no orphan (tests/conformance/harness.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.harness import TAG, check_run, new_tag, run_case, two_phases
from tests.support.runs import arl_learn


def _newest_gymnasium(prefixes: tuple[str, ...]) -> list[str]:
    import gymnasium

    newest: dict[str, tuple[int, str]] = {}
    for env_id, spec in gymnasium.registry.items():
        entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
        if not entry.startswith(prefixes) or spec.version is None:
            continue
        if spec.name not in newest or spec.version > newest[spec.name][0]:
            newest[spec.name] = (spec.version, env_id)
    return sorted(env_id for _, env_id in newest.values())


CLASSIC_CONTROL = _newest_gymnasium(("gymnasium.envs.classic_control",))
MUJOCO = _newest_gymnasium(("gymnasium.envs.mujoco",))


def test_the_lists_are_the_registries() -> None:
    assert {"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"} <= set(CLASSIC_CONTROL)
    assert {"Hopper-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5", "Walker2d-v5"} <= set(MUJOCO)


@pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
def test_gymnasium_classic_control(tmp_path: Path, env_id: str) -> None:
    run_case(tmp_path, two_phases(f"gymnasium:{env_id}", train_steps=400, test_episodes=2,
                                  env_args=["max_episode_steps=50"]))


@pytest.mark.slow
@pytest.mark.parametrize("env_id", MUJOCO)
def test_gymnasium_mujoco(tmp_path: Path, env_id: str) -> None:
    pytest.importorskip("mujoco")
    run_case(tmp_path, two_phases(f"gymnasium:{env_id}", train_steps=300, test_episodes=2,
                                  env_args=["max_episode_steps=40"]))


def _pettingzoo(registry: str, name: str) -> list[str]:
    module = importlib.import_module(registry)
    return sorted(getattr(module, name))


PETTINGZOO_CLASSIC = _pettingzoo("pettingzoo.classic.all_modules", "classic_environments")
MPE = _pettingzoo("mpe2.all_modules", "mpe_environments")
GAME_ARGS = {"classic/go_v5": ["board_size=5"]}  # a 5x5 board: the same game, a twentieth of 19x19's observation
# a game of two untrained chess players lasts hundreds of moves (python-chess ends it by the 75-move rule at
# the latest): one worker, so that one game ends within the training phase
GAME_STEPS = {"classic/chess_v6": 3000}
GAME_WORKERS = {"classic/chess_v6": 1}


@pytest.mark.parametrize("game", PETTINGZOO_CLASSIC)
def test_pettingzoo_classic(tmp_path: Path, game: str) -> None:
    module = f"pettingzoo.classic.{game.split('/')[1]}"
    run_case(tmp_path, two_phases(f"pettingzoo:{module}", train_steps=GAME_STEPS.get(game, 300), test_episodes=2,
                                  num_envs=GAME_WORKERS.get(game, 2), env_args=GAME_ARGS.get(game, [])))


@pytest.mark.parametrize("game", MPE)
def test_pettingzoo_mpe(tmp_path: Path, game: str) -> None:
    module = f"mpe2.{game.split('/')[1]}"
    run_case(tmp_path, two_phases(f"pettingzoo:{module}", train_steps=300, test_episodes=2, env_args=["max_cycles=25"]))


@pytest.mark.slow
def test_grid2op_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("grid2op")
    # untrained operators black the grid out within a few dozen steps: episodes end soon
    run_case(tmp_path, two_phases("grid2op:l2rpn_case14_sandbox", train_steps=200, test_episodes=2, num_envs=1))


# -- palaestrai-environments, through run files -----------------------------------------------------

DUMMY_BRAIN = {"name": "palaestrai.agent.dummy_brain:DummyBrain", "params": {}}
DUMMY_MUSCLE = {"name": "palaestrai.agent.dummy_muscle:DummyMuscle", "params": {}}
PPO_BRAIN = {"name": "harl:PPOBrain", "params": {"rollout_size": 64, "epochs": 2, "batch_size": 32, "fc_dims": [16]}}
PPO_MUSCLE = {"name": "harl:PPOMuscle", "params": {}}
OBJECTIVE = {"name": "palaestrai.agent:DummyObjective", "params": {}}
TERMINATION = [{"name": "palaestrai.experiment:EnvironmentTerminationCondition", "params": {}}]


def _agent(name: str, sensors: list[str], actuators: list[str], learns: bool = True) -> dict[str, Any]:
    return {"name": name, "brain": PPO_BRAIN if learns else DUMMY_BRAIN, "muscle": PPO_MUSCLE if learns else DUMMY_MUSCLE,
            "objective": OBJECTIVE, "sensors": sensors, "actuators": actuators}


# class -> (params, agents, simulation): one case per environment the package holds
PALAESTRAI_ENVIRONMENTS: dict[str, tuple[dict[str, Any], list[dict[str, Any]], str]] = {
    "palaestrai_environments.random:ContinuousRandomEnvironment": (
        {"max_iter": 20, "num_sensors": 4},
        [_agent("agent", [f"env.Sensor-{i}" for i in range(4)], [f"env.Actuator-{i}" for i in range(4)])], "Vanilla"),
    "palaestrai_environments.random:DiscreteRandomEnvironment": (
        {"max_iter": 20, "num_sensors": 4},
        [_agent("agent", [f"env.Sensor-{i}" for i in range(4)], ["env.Actuator-0"])], "Vanilla"),
    "palaestrai_environments.gym:GymEnvironment": (
        {"env_name": "CartPole-v1", "conversion": None, "reward_space": None},
        [_agent("agent", ["env.0"], ["env.0"])], "Vanilla"),
    "palaestrai_environments.tictactoe:TicTacToeEnvironment": (
        {"twoplayer": True, "invalid_turn_limit": 3},
        [_agent(name, [f"env.Tile {r}-{c}" for r in (1, 2, 3) for c in (1, 2, 3)], ["env.Field selector"], learns)
         for name, learns in (("cross", True), ("nought", False))], "TakingTurns"),
}


def test_every_environment_of_palaestrai_environments_has_a_case() -> None:
    """Every palaestrAI Environment class the package defines (its connect_four package holds
    the game's rules only, and connect_four_old imports a package that does not exist)."""
    pytest.importorskip("palaestrai_environments")
    import palaestrai_environments
    from palaestrai.environment import Environment

    found = set()
    for info in pkgutil.walk_packages(palaestrai_environments.__path__, "palaestrai_environments.",
                                      onerror=lambda name: None):
        try:
            module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - a module that does not import holds no environment we can run
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Environment) and cls.__module__.startswith("palaestrai_environments"):
                package = cls.__module__.rsplit(".", 1)[0]
                found.add(f"{package}:{cls.__name__}")
    assert found == set(PALAESTRAI_ENVIRONMENTS), found


@pytest.mark.parametrize("environment", sorted(PALAESTRAI_ENVIRONMENTS))
def test_palaestrai_environments(tmp_path: Path, environment: str) -> None:
    pytest.importorskip("palaestrai_environments")
    params, agents, simulation = PALAESTRAI_ENVIRONMENTS[environment]
    train = {
        "environments": [{"environment": {"name": environment, "uid": "env", "params": params}}],
        "agents": agents,
        "simulation": {"name": f"palaestrai.simulation:{simulation}", "conditions": TERMINATION},
        "phase_config": {"mode": "train", "worker": 2, "episodes": 3},
    }
    data = {"uid": "case", "seed": 3, "version": "3.5",
            "schedule": [{"train": train}, {"test": {"phase_config": {"mode": "test", "worker": 1, "episodes": 1}}}],
            "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition",
                                         "params": {}}}}
    path = tmp_path / "case.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    env = new_tag()
    proc = arl_learn([path.name], tmp_path, 240, env=env)
    episodes = check_run(proc, env[TAG], tmp_path / "results" / "case")
    assert episodes["test"] >= len(agents), episodes
