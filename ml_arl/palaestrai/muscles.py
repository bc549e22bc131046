"""A palaestrAI Muscle acting in our worker (the worker's side of ml_arl.palaestrai.agents).

``PalaestraiMuscle`` keeps ml_arl.acting.muscle's ``Acting`` contract: it turns each observation
row back into the agent's ``SensorInformation`` (ml_arl.palaestrai.spaces), calls the user's
``propose_actions(sensors, actuators_available)``, encodes the setpoints as our action row and
hands ``data_for_brain`` up with the step (``ActionInfo.extras``). A brain's update arrives
pickled in ``MuscleWeights`` and reaches ``muscle.update(update)`` once per new update.
What the muscle or its update raises is a PalaestraiComponentError (restartable).
No torch here: this runs in the workers.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import ActionTuple

from ml_arl.acting.muscle import ActionInfo
from ml_arl.core.exceptions import PalaestraiComponentError
from ml_arl.palaestrai.definitions import PluginSpec
from ml_arl.palaestrai.spaces import ActionLayout, ObservationLayout

MUSCLE = "ml_arl.palaestrai.muscles:PalaestraiMuscle"


@dataclass(frozen=True)
class MuscleWeights:
    """What a worker's PalaestraiMuscle is built and updated with (picklable, torch-free: the
    brain's update travels pickled)."""

    agent: str
    muscle: PluginSpec
    # pickle of (the agent's SensorInformation, its ActuatorInformation), run-file order, values as the
    # environment started: made once by the trainer, read once by each muscle (a palaestrAI space
    # pickles as its string form, whose parsing would otherwise cost every step message)
    wiring: bytes
    update: Optional[bytes] = None  # pickle of the brain's latest update
    update_version: int = 0
    filters: tuple[PluginSpec, ...] = ()  # the agent's palaestrAI filters, in the run file's order


@dataclass(frozen=True)
class FilteredStep:
    """What a muscle with filters hands its brain with a step: its data, and the sensor readings'
    values as the filters made them (the brain's memory holds those)."""

    data: Any
    readings: list[Any]


class PalaestraiMuscle:
    """A palaestrAI Muscle acting in our worker."""

    def __init__(self, weights: MuscleWeights, deterministic: bool = False, seed: int = 0):
        self.deterministic = deterministic
        self._version = -1
        self.muscle = weights.muscle.build()
        self.muscle._uid = weights.agent  # palaestrAI names a muscle after its agent
        sensors, actuators = pickle.loads(weights.wiring)
        self.sensors, self.actuators = list(sensors), list(actuators)
        self.obs = ObservationLayout([s.uid for s in self.sensors], [s.space for s in self.sensors])
        self.act_layout = ActionLayout([a.uid for a in self.actuators], [a.space for a in self.actuators])
        self.branches = tuple(self.act_layout.branches)
        # the actuators it is offered each step: the same objects (values reset to the environment's),
        # their spaces seeded once, so space.sample() differs from step to step and repeats with the seed
        self.available = [copy.deepcopy(a) for a in self.actuators]
        for i, actuator in enumerate(self.available):
            actuator.space.seed(int(seed) * 1009 + i)
        setup = getattr(self.muscle, "setup", None)
        if callable(setup):
            setup()
        # palaestrAI's filters, each its own instance per muscle: pre-processing in order, post-processing
        # in reverse, as its RolloutWorker runs them
        self.filters = []
        for spec in weights.filters:
            agent_filter = spec.build()
            agent_filter.muscle = self.muscle
            agent_filter.setup()
            self.filters.append(agent_filter)
        self.set_weights(weights)

    def set_weights(self, weights: MuscleWeights) -> None:
        if weights.update is not None and weights.update_version != self._version:
            try:
                self.muscle.update(pickle.loads(weights.update))
            except Exception as err:
                raise PalaestraiComponentError(f"{type(self.muscle).__name__}.update() raised {type(err).__name__}: {err}") from err
        self._version = weights.update_version

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray]) -> ActionInfo:
        from palaestrai.types import Mode

        self.muscle._mode = Mode.TEST if self.deterministic else Mode.TRAIN
        rows = obs[0]
        n = rows.shape[0]
        cont = np.zeros((n, self.act_layout.continuous), np.float32)
        disc = np.zeros((n, len(self.branches)), np.int32)
        extras: list[Any] = []
        for i in range(n):
            sensors = []
            for info, value in zip(self.sensors, self.obs.decode(rows[i])):
                reading = copy.copy(info)
                reading._value = value  # decoded from its own space: no need to check it again
                sensors.append(reading)
            for actuator, offered_one in zip(self.available, self.actuators):
                actuator._value = copy.copy(offered_one._value)
            available: list[Any] = list(self.available)
            try:
                for agent_filter in self.filters:
                    sensors, available = agent_filter.muscle_pre_process(sensors=sensors, actuators_available=available)
                filtered = [r.value for r in sensors] if self.filters else None
                out = self.muscle.propose_actions(sensors, available)
                setpoints, data = out if isinstance(out, tuple) else (out, None)
                for agent_filter in reversed(self.filters):
                    setpoints, data = agent_filter.muscle_post_process(setpoints=setpoints, data_for_brain=data)
            except Exception as err:
                raise PalaestraiComponentError(
                    f"{type(self.muscle).__name__}.propose_actions() (or its filters) raised {type(err).__name__}: {err}"
                ) from err
            by_uid = {a.uid: a for a in setpoints or []}
            values = [by_uid[a.uid].value if a.uid in by_uid else a.value for a in self.actuators]
            cont[i], disc[i] = self.act_layout.encode(values)
            # with filters, the brain's memory holds the readings as the filters made them (palaestrAI's Learner)
            extras.append(data if filtered is None else FilteredStep(data, filtered))
        d = len(self.branches) + self.act_layout.continuous
        zeros = np.zeros(n, np.float32)
        return ActionInfo(cont, disc, np.zeros((n, d), np.float32), zeros, allowed,
                          ActionTuple(continuous=cont.copy(), discrete=disc.copy()), extras=extras)
