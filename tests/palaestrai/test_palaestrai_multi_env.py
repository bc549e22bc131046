"""A phase with several palaestrAI environments: each updated every step with its own actuators,
readings and rewards joined, the episode ending when either is done (palaestrAI's SimulationController)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("palaestrai")

from ml_arl.palaestrai.definitions import AgentWiring, EnvironmentSpec, PluginSpec  # noqa: E402
from ml_arl.palaestrai.env import PalaestraiEnv  # noqa: E402
from ml_arl.palaestrai.runfile import read  # noqa: E402

DUMMY = "palaestrai.environment.dummy_environment:DummyEnvironment"
SUM = PluginSpec("palaestrai.agent:DummyObjective", {})


def two_envs() -> tuple[EnvironmentSpec, ...]:
    return (EnvironmentSpec(DUMMY, "a", {"discrete": True, "max_iter": 5}),
            EnvironmentSpec(DUMMY, "b", {"discrete": True, "max_iter": 8}))


def test_both_environments_step_and_the_first_done_ends_the_episode() -> None:
    agents = [AgentWiring("left", ("a.0", "a.1"), ("a.0",), SUM), AgentWiring("both", ("a.2", "b.2"), ("b.0",), SUM)]
    env = PalaestraiEnv([two_envs()], agents, seed=3)
    specs = env.behavior_specs
    assert specs["both"].observation_specs[0].shape == (6 + 9,)  # a Discrete(max_iter + 1) sensor from each environment
    updates = {uid: 0 for uid in ("a", "b")}
    for driver_uid, driver in env._driver.drivers.items():
        original = driver.env.update

        def counting(actuators: list[Any], uid: str = driver_uid, original: Any = original) -> Any:
            updates[uid] += 1
            assert all(not str(a.uid).startswith(("a.", "b.")) for a in actuators)  # ids without the env uid
            return original(actuators)

        driver.env.update = counting
    ends = []
    for step in range(12):
        for name in ("left", "both"):
            decision, terminal = env.get_steps(name)
            if len(terminal):
                ends.append((step, name, float(terminal.reward[0]), env.objective_of(name, True)))
            env.set_actions(name, specs[name].action_spec.empty_action(len(decision)))
        env.step()
    assert updates["a"] == updates["b"] == 12  # every environment every step
    # a (5 steps) ends each episode first; the reward an agent sees is both environments' rewards together
    first = [e for e in ends if e[0] == 5]
    assert {e[1] for e in first} == {"left", "both"}
    assert all(reward == objective for _, _, reward, objective in first)


def test_a_run_file_with_two_environments_reads_and_checks_both() -> None:
    data: dict[str, Any] = {"uid": "two", "seed": 1, "version": "3.5", "schedule": [{"p": {
        "environments": [{"environment": {"name": DUMMY, "uid": "a", "params": {"max_iter": 5}}},
                         {"environment": {"name": DUMMY, "uid": "b", "params": {"max_iter": 8}}}],
        "agents": [{"name": "x", "brain": {"name": "harl:PPOBrain", "params": {}},
                    "muscle": {"name": "harl:PPOMuscle", "params": {}},
                    "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}},
                    "sensors": ["a.0", "b.1"], "actuators": ["b.0"]}],
        "simulation": {"name": "palaestrai.simulation:Vanilla", "conditions": []},
        "phase_config": {"mode": "train", "worker": 1, "episodes": 1}}}],
        "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition", "params": {}}}}
    out = read(data, "two.yml")
    assert [e.uid for e in out.environments[0]] == ["a", "b"]
    data["schedule"][0]["p"]["agents"][0]["sensors"] = ["a.0", "c.1"]
    data["schedule"][0]["p"]["environments"][1]["environment"]["uid"] = "a"
    from ml_arl.core.exceptions import ConfigError

    with pytest.raises(ConfigError) as err:
        read(data, "two.yml")
    assert any("'a' is the uid of an earlier environment of this phase" in p for p in err.value.problems), err.value.problems
    assert np.size(err.value.problems) == 1
