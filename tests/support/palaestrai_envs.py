"""User-written palaestrAI environments for tests/palaestrai/test_palaestrai_env.py (and anything else
that needs a palaestrAI ``Environment`` that is not palaestrAI's own).

``EchoEnvironment``: one Box sensor ``position`` (shape (2,), in [-1, 1]), one Box sensor ``echo``
(shape (2,), in [-2, 2]: the ``force`` setpoint the last update received, zeros at the start and
when no setpoint came) and one Box actuator ``force`` (shape (2,), in [-2, 2]). Each update moves
the position by ``force / 4`` (clipped to [-1, 1]); the reward ``"echo reward"`` is the sum of
the force (a Box of shape (1,)). The episode ends after ``max_iter`` updates: ``done`` (a terminal
state), or with ``truncate`` ``truncated=True`` (a time limit). ``updates`` counts the updates of
the instance since its construction, ``starts`` its ``start_environment`` calls.

``AsyncEchoEnvironment``: the same with ``start_environment`` and ``update`` as coroutines
(palaestrAI awaits them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from palaestrai.agent import ActuatorInformation, RewardInformation, SensorInformation
from palaestrai.environment import Environment, EnvironmentBaseline, EnvironmentState
from palaestrai.types import Box


class EchoEnvironment(Environment):
    def __init__(self, uid: str, broker_uri: Any = None, seed: int = 0, max_iter: int = 3, truncate: bool = False):
        super().__init__(uid, seed=seed)
        self.max_iter = int(max_iter)
        self.truncate = bool(truncate)
        self.iter = 0
        self.position = np.zeros(2)
        self.echo = np.zeros(2)
        self.updates = 0
        self.starts = 0

    def _sensors(self) -> list[SensorInformation]:
        return [
            SensorInformation(self.position.copy(), Box(-1.0, 1.0, shape=(2,)), "position"),
            SensorInformation(self.echo.copy(), Box(-2.0, 2.0, shape=(2,)), "echo"),
        ]

    def start_environment(self) -> EnvironmentBaseline:
        self.starts += 1
        self.iter = 0
        self.position = np.zeros(2)
        self.echo = np.zeros(2)
        return EnvironmentBaseline(
            sensors_available=self._sensors(),
            actuators_available=[ActuatorInformation(np.zeros(2), Box(-2.0, 2.0, shape=(2,)), "force")],
        )

    def update(self, actuators: list[ActuatorInformation]) -> EnvironmentState:
        self.updates += 1
        self.iter += 1
        forces = [a for a in actuators if str(a.uid) == "force"]
        self.echo = np.asarray(forces[0].value, dtype=np.float64).reshape(2) if forces else np.zeros(2)
        self.position = np.clip(self.position + self.echo / 4.0, -1.0, 1.0)
        reward = RewardInformation(np.array([float(self.echo.sum())]), Box(-4.0, 4.0, shape=(1,)), "echo reward")
        end = self.iter >= self.max_iter
        return EnvironmentState(
            sensor_information=self._sensors(),
            rewards=[reward],
            done=end,
            terminated=(end and not self.truncate) if end else None,
            truncated=(end and self.truncate) if end else None,
        )


class AsyncEchoEnvironment(EchoEnvironment):
    async def start_environment(self) -> EnvironmentBaseline:  # type: ignore[override]
        return EchoEnvironment.start_environment(self)

    async def update(self, actuators: list[ActuatorInformation]) -> EnvironmentState:  # type: ignore[override]
        return EchoEnvironment.update(self, actuators)
