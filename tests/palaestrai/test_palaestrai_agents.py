"""ml_arl.palaestrai.agents: a palaestrAI Brain as a trainer and its Muscle in a worker, checked
step by step against what palaestrAI's Learner and RolloutWorker do (tests/support/palaestrai_agents.py)."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("palaestrai")

from ml_arl.core.experience import Trajectory  # noqa: E402
from ml_arl.palaestrai.agents import BrainTrainer  # noqa: E402
from ml_arl.palaestrai.muscles import PalaestraiMuscle  # noqa: E402
from ml_arl.palaestrai.runfile import read  # noqa: E402
from ml_arl.results.summary_writers import StatsReporter  # noqa: E402
from ml_arl.settings import build_run_options  # noqa: E402

DUMMY = "palaestrai.environment.dummy_environment:DummyEnvironment"


def run_file(brain: str, muscle: str, muscle_params: dict[str, Any]) -> dict[str, Any]:
    agent = {"name": "a", "brain": {"name": brain, "params": {"every": 3}} if "Counting" in brain else {"name": brain, "params": {}},
             "muscle": {"name": muscle, "params": muscle_params},
             "objective": {"name": "palaestrai.agent:DummyObjective", "params": {}},
             "sensors": ["e.0", "e.1"], "actuators": ["e.0", "e.1"]}
    return {"uid": "t", "seed": 1, "version": "3.5", "schedule": [{"p": {
        "environments": [{"environment": {"name": DUMMY, "uid": "e", "params": {"discrete": True}}}],
        "agents": [agent],
        "simulation": {"name": "palaestrai.simulation:Vanilla", "conditions": []},
        "phase_config": {"mode": "train", "worker": 1, "episodes": 1}}}],
        "run_config": {"condition": {"name": "palaestrai.experiment:VanillaRunGovernorTerminationCondition", "params": {}}}}


def trainer_for(data: dict[str, Any]) -> BrainTrainer:
    translation = read(data, "run.yml")
    options = build_run_options({k: v for k, v in translation.config.items() if k != "env_settings"}, {}, "run.yml")
    from mlagents_envs.base_env import ActionSpec, BehaviorSpec

    from ml_arl.core.behavior_specs import vector_obs_spec

    spec = BehaviorSpec([vector_obs_spec(20)], ActionSpec(0, (10, 10)))
    return BrainTrainer("a", options.behaviors["a"], spec, StatsReporter("a", []), None, torch.device("cpu"), seed=1)


def trajectory(t: int, start: bool, done: bool, extras: list[Any]) -> Trajectory:
    obs = np.zeros((t, 20), np.float32)
    obs[:, 0] = 1.0
    obs[:, 10] = 1.0
    return Trajectory("a", "0-0", [obs], [obs[0]], np.zeros((t, 0), np.float32), np.tile([[3, 4]], (t, 1)).astype(np.int32),
                      None, np.zeros((t, 2), np.float32), np.arange(t, dtype=np.float32), np.zeros(t, np.float32), 0, done,
                      False, 0, env_rewards=np.arange(t, dtype=np.float32) * 2, episode_start=start, extras=extras)


def test_the_brain_thinks_in_the_learners_order_and_its_updates_reach_the_muscle() -> None:
    trainer = trainer_for(run_file("tests.support.palaestrai_agents:CountingBrain",
                                   "tests.support.palaestrai_agents:CountingMuscle", {}))
    brain = trainer.brain
    assert brain.setup_called and brain.calls == 1 and brain.nones == 1  # the muscle's first model: thinking(id, None)
    extras = [{"step": i} for i in range(4)]
    trainer.add_experience(trajectory(4, start=True, done=True, extras=extras))
    # thinking(None) at the episode's start, then once per step with the data the muscle handed up with it
    assert brain.calls == 1 + 1 + 4 and brain.nones == 2
    assert brain.data == extras
    shard = brain.memory.tail(4)
    assert list(shard.objective.reshape(-1)) == [0.0, 1.0, 2.0, 3.0]  # our trajectory's rewards: the objective
    assert shard.rewards.to_numpy().reshape(-1).tolist() == [0.0, 2.0, 4.0, 6.0]  # the environment reward
    assert list(shard.dones.reshape(-1)) == [False, False, False, True]
    assert list(shard.actuator_setpoints.iloc[-1]) == [3, 4]  # the setpoints, decoded from the actions
    assert list(shard.sensor_readings.iloc[-1]) == [0, 0]  # the readings, decoded from the one-hot observation
    assert trainer.ready_to_update()  # calls 3 and 6 returned updates; the latest goes out
    trainer.update()
    snapshot = trainer.policy_snapshot()
    assert pickle.loads(snapshot.weights.update) == 6
    muscle = PalaestraiMuscle(snapshot.weights, False, seed=0)
    assert muscle.muscle.value == 6
    info = muscle.act([np.tile(trajectory(1, False, False, [None]).obs[0], (2, 1))], None)
    assert info.discrete.tolist() == [[6, 6], [6, 6]]  # CountingMuscle sets each actuator to its update
    assert info.extras is not None and info.extras[0]["seen"] == 0
    # the brain's own store()/load() through our checkpoints
    state = trainer.state()
    fresh = trainer_for(run_file("tests.support.palaestrai_agents:CountingBrain",
                                 "tests.support.palaestrai_agents:CountingMuscle", {}))
    fresh.load_state(state, resume=True)
    assert fresh.brain.calls == 6


def test_dummy_muscle_samples_differ_from_step_to_step_and_repeat_with_the_seed() -> None:
    trainer = trainer_for(run_file("palaestrai.agent:DummyBrain", "palaestrai.agent:DummyMuscle", {}))
    weights = trainer.policy_snapshot().weights
    obs = [np.tile(trajectory(1, False, False, [None]).obs[0], (1, 1))]

    def actions(seed: int) -> list[list[int]]:
        muscle = PalaestraiMuscle(weights, False, seed=seed)
        return [muscle.act(obs, None).discrete[0].tolist() for _ in range(8)]

    first = actions(5)
    assert len({tuple(a) for a in first}) > 1
    assert actions(5) == first
    assert actions(6) != first


def test_filters_run_on_both_sides_in_palaestrais_order() -> None:
    data = run_file("tests.support.palaestrai_agents:CountingBrain", "tests.support.palaestrai_agents:CountingMuscle", {})
    data["schedule"][0]["p"]["agents"][0]["filters"] = [
        {"name": "tests.support.palaestrai_agents:OffsetFilter", "params": {"offset": 2}}]
    trainer = trainer_for(data)
    assert trainer.filters[0].set_up and trainer.filters[0].brain is trainer.brain
    assert trainer.brain.calls == 1
    # the brain's first update (call 3) comes back through brain_post_process: 3 + 2
    trainer.add_experience(trajectory(2, start=True, done=False, extras=[None, None]))
    trainer.update()
    snapshot = trainer.policy_snapshot()
    assert pickle.loads(snapshot.weights.update) == 3 + 2
    muscle = PalaestraiMuscle(snapshot.weights, False, seed=0)
    assert muscle.filters[0].set_up and muscle.filters[0].muscle is muscle.muscle
    info = muscle.act([trajectory(1, False, False, [None]).obs[0]], None)
    step = info.extras[0]
    assert step.data["seen"] == 2  # the muscle saw the reading 0 as the filter made it: 0 + 2
    assert step.readings == [2, 2]
    # the brain's memory holds the readings as the muscle's filters made them
    trainer.add_experience(trajectory(1, start=False, done=False, extras=[step]))  # its observation decodes as 0, 0
    assert list(trainer.brain.memory.tail(1).sensor_readings.iloc[-1]) == [2, 2]


def test_filters_with_a_harl_brain_are_one_line() -> None:
    data = run_file("harl:PPOBrain", "harl:PPOMuscle", {})
    data["schedule"][0]["p"]["agents"][0]["filters"] = [
        {"name": "tests.support.palaestrai_agents:OffsetFilter", "params": {}}]
    from ml_arl.core.exceptions import ConfigError

    with pytest.raises(ConfigError) as err:
        read(data, "run.yml")
    assert len(err.value.problems) == 1 and "filters run with palaestrAI's Brain/Muscle API" in err.value.problems[0]
