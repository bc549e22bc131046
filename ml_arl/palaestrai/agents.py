"""Any palaestrAI Brain/Muscle pair on our workers and trainer loop.

palaestrAI's agent API: a ``Muscle`` acts (``propose_actions(sensors, actuators_available)`` ->
``(setpoints, data_for_brain)``, ``update(update)``), a ``Brain`` learns (``setup()``,
``thinking(muscle_id, data_from_muscle)`` -> an update or None, ``store()``/``load()`` through its
dumpers, a ``Memory``). Here:

* ``PalaestraiMuscle`` (ml_arl.palaestrai.muscles) is the worker's muscle (ml_arl.acting.muscle's ``Acting`` contract): it
  turns the observation row back into the agent's ``SensorInformation`` (ml_arl.palaestrai.spaces),
  calls the user's muscle, and encodes its setpoints as our action row; ``data_for_brain`` rides up
  with the step (``ActionInfo.extras`` -> ``Trajectory.extras``);
* ``BrainTrainer`` is the behavior's trainer (a user trainer, ml_arl.trainers.trainer): for each step
  of each trajectory, in order, it appends what palaestrAI's Learner appends to ``brain.memory``
  (the sensor readings and setpoints, the reward, the objective, done) and calls
  ``brain.thinking(muscle_id, data)``; an episode's first step is preceded by
  ``thinking(muscle_id, None)``, as palaestrAI's first request of an episode is. The latest
  non-None update goes to every worker's muscle (``muscle.update(update)``), as palaestrAI's
  Learner hands its latest update to every rollout worker;
* the brain's ``store()``/``load()`` write and read through an in-memory dumper, and what it
  stored is saved in our checkpoints (phases carry it over, ``--resume`` and ``load`` read it).

Where we differ from palaestrAI: updates reach the muscles with the next step message, not before
the muscle's next action; in a test phase the brain is not called (test mode never changes
weights) and the muscle acts with its ``mode`` set to TEST; the brain's memory holds the
environment reward as one ``RewardInformation`` (``reward``), the sum of the environment's rewards.
"""

from __future__ import annotations

import copy
import io
import logging
import pickle
from typing import Any, Optional

import numpy as np

from ml_arl.core.actor_weights import PolicySnapshot
from ml_arl.core.experience import Trajectory
from ml_arl.palaestrai.definitions import EnvironmentSpec, PluginSpec, import_problem, offered
from ml_arl.palaestrai.muscles import MUSCLE, FilteredStep, MuscleWeights
from ml_arl.palaestrai.spaces import ActionLayout, ObservationLayout
from ml_arl.trainers.trainer import Trainer

logger = logging.getLogger(__name__)

class _BytesDumper:
    """A palaestrAI brain dumper that keeps the brain's dumps in memory, by tag."""

    def __init__(self) -> None:
        self.dumps: dict[str, bytes] = {}

    def save(self, brain_state: Any, tag: Optional[str] = None) -> None:
        brain_state.seek(0)
        self.dumps[tag or ""] = brain_state.read()

    def load(self, tag: Optional[str] = None) -> io.BytesIO:
        if (tag or "") not in self.dumps:
            raise FileNotFoundError(f"no brain dump tagged {tag!r}")
        return io.BytesIO(self.dumps[tag or ""])


class BrainTrainer(Trainer):
    """A palaestrAI Brain as a behavior's trainer (hyperparameters: brain, muscle, sensors,
    actuators and the environment, as ml_arl.palaestrai.runfile writes them)."""

    @classmethod
    def settings_problems(cls, settings: Any, behavior: str) -> list[str]:
        """The brain, muscle and filter classes the run file names import (the file was read with
        only their modules found: ml_arl.palaestrai.run_sections.Reader)."""
        hp = dict(settings.hyperparameters)
        named = [("brain", hp.get("brain")), ("muscle", hp.get("muscle"))]
        named += [(f"filters[{i}]", f) for i, f in enumerate(hp.get("filters") or [])]
        problems = []
        for key, plugin in named:
            if not isinstance(plugin, dict) or not isinstance(plugin.get("name"), str):
                continue
            problem = import_problem(plugin["name"])
            if problem is not None:
                problems.append(f"agent {behavior!r}: {key}: {problem}")
        return problems

    def build(self) -> None:
        from palaestrai.agent import RewardInformation
        from palaestrai.types import Box, Mode

        hp = dict(self.hp)
        sensors, actuators = [], []
        if self.env_extras is not None:  # what the worker's environment offers (PalaestraiEnv.behavior_extras)
            sensors, actuators = pickle.loads(self.env_extras)
        else:  # built without a worker's word (a checkpoint loaded on its own): start the environment here
            for env in hp["environments"]:
                s, a = offered(EnvironmentSpec(env["name"], env["uid"], dict(env.get("params") or {})),
                               int(hp.get("seed", 0)))
                sensors += s
                actuators += a
        by_sensor, by_actuator = {s.uid: s for s in sensors}, {a.uid: a for a in actuators}
        self.sensor_infos = [by_sensor[uid] for uid in hp["sensors"]]
        self.actuator_infos = [by_actuator[uid] for uid in hp["actuators"]]
        self.obs_layout = ObservationLayout(hp["sensors"], [s.space for s in self.sensor_infos])
        self.act_layout = ActionLayout(hp["actuators"], [a.space for a in self.actuator_infos])
        self.wiring = pickle.dumps((self.sensor_infos, self.actuator_infos))
        where = f"agent {self.behavior!r}"
        self.muscle_spec = PluginSpec(hp["muscle"]["name"], dict(hp["muscle"].get("params") or {}), f"{where}: muscle")
        self.brain = PluginSpec(hp["brain"]["name"], dict(hp["brain"].get("params") or {}), f"{where}: brain").build()
        self.dumper = _BytesDumper()
        self.brain._seed = int(hp.get("seed", 0))
        self.brain._name = self.behavior
        self.brain.sensors = [copy.deepcopy(s) for s in sensors if s.uid in set(hp["sensors"])]
        self.brain.actuators = [copy.deepcopy(a) for a in actuators if a.uid in set(hp["actuators"])]
        self.brain._dumpers = [self.dumper]
        self.brain.mode = Mode.TRAIN
        self.filter_specs = tuple(PluginSpec(f["name"], dict(f.get("params") or {}), f"{where}: filters[{i}]")
                                  for i, f in enumerate(hp.get("filters") or []))
        self.filters = [spec.build() for spec in self.filter_specs]
        for agent_filter in self.filters:  # palaestrAI's Learner: each filter sees the brain, then is set up
            agent_filter.brain = self.brain
            agent_filter.setup()
        self.brain.setup()
        self._reward = lambda value: RewardInformation(np.array([value], np.float32), Box(-np.inf, np.inf, (1,)), "reward")
        self.update_bytes: Optional[bytes] = None
        self.update_version = 0
        self._fresh = False
        self._think(f"{self.behavior}-initial", None)  # the muscles' first model, as palaestrAI's first request gets it

    def _think(self, muscle_id: str, data: Any) -> None:
        for agent_filter in self.filters:
            muscle_id, data = agent_filter.brain_pre_process(muscle_id, data)
        update = self.brain.thinking(muscle_id, data)
        for agent_filter in reversed(self.filters):
            update = agent_filter.brain_post_process(update)
        if update is not None:  # palaestrAI tests `is not None`: 0 and {} are updates
            self.update_bytes = pickle.dumps(update)
            self.update_version += 1
            self._fresh = True

    def add_experience(self, traj: Trajectory) -> None:
        from palaestrai.types import Mode

        self.brain.mode = Mode.TRAIN
        muscle_id = f"{self.behavior}-{traj.agent_id}"
        if traj.episode_start:
            self._think(muscle_id, None)
        env_rewards = traj.env_rewards if traj.env_rewards is not None else traj.rewards
        extras = traj.extras or [None] * len(traj)
        last = len(traj) - 1
        for t in range(len(traj)):
            step = extras[t]
            values = self.obs_layout.decode(traj.obs[0][t])
            if isinstance(step, FilteredStep):  # the readings as the muscle's filters made them
                values, step = step.readings, step.data
            readings = []
            for info, value in zip(self.sensor_infos, values):
                reading = copy.copy(info)
                reading._value = value  # decoded from its own space: no need to check it again
                readings.append(reading)
            setpoints = []
            for info, value in zip(self.actuator_infos, self.act_layout.values(traj.continuous[t], traj.discrete[t])):
                setpoint = copy.copy(info)
                setpoint._value = value
                setpoints.append(setpoint)
            done = t == last and traj.done
            self.brain.memory.append(
                muscle_id, sensor_readings=readings, actuator_setpoints=setpoints,
                rewards=[self._reward(float(env_rewards[t]))], objective=np.array([float(traj.rewards[t])]),
                done=done, terminated=done and not traj.interrupted, truncated=done and traj.interrupted,
            )
            self._think(muscle_id, step)
            if done:
                self.brain.store()

    def ready_to_update(self) -> bool:
        return self._fresh

    def update(self) -> None:
        self._fresh = False

    def policy_snapshot(self) -> PolicySnapshot:
        weights = MuscleWeights(self.behavior, self.muscle_spec, self.wiring, self.update_bytes, self.update_version,
                                self.filter_specs)
        return PolicySnapshot(self.policy_version, weights, muscle=MUSCLE)

    def state(self) -> dict[str, Any]:
        import torch

        self.brain.store()
        dumps = {tag: torch.from_numpy(np.frombuffer(data, np.uint8).copy()) for tag, data in self.dumper.dumps.items()}
        return {"global_step": self.step, "brain_dumps": dumps, "update_version": self.update_version}

    def load_state(self, state: dict[str, Any], resume: bool) -> None:
        self.dumper.dumps = {str(tag): bytes(t.numpy().tobytes()) for tag, t in state.get("brain_dumps", {}).items()}
        self.brain.load()
        if resume:
            self.step = int(state["global_step"])
