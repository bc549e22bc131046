"""A Brain/Muscle pair and an Objective written to palaestrAI's agent API, as a palaestrAI user
writes them, for the tests of ml_arl.palaestrai.agents.

``CountingMuscle`` sets every Discrete actuator to the brain's latest update (an int) and hands
the brain the step's first sensor reading; ``CountingBrain`` answers every 5th thinking call with
its call count, records what it saw, and stores/loads its count through palaestrAI's dumpers."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from palaestrai.agent import Brain, BrainDumper, Muscle, Objective


class CountingMuscle(Muscle):
    def __init__(self, offset: int = 0):
        super().__init__()
        self.offset = int(offset)
        self.value = 0

    def propose_actions(self, sensors: list[Any], actuators_available: list[Any]) -> tuple[list[Any], Any]:
        for actuator in actuators_available:
            n = int(actuator.space.n)
            actuator(int((self.value + self.offset) % n))
        return actuators_available, {"seen": np.asarray(sensors[0].value).tolist(), "mode": str(self.mode)}

    def update(self, update: Any) -> None:
        self.value = int(update)


class CountingBrain(Brain):
    def __init__(self, every: int = 5):
        super().__init__()
        self.every = int(every)
        self.calls = 0
        self.data: list[Any] = []
        self.nones = 0
        self.setup_called = False

    def setup(self) -> None:
        self.setup_called = True

    def thinking(self, muscle_id: str, data_from_muscle: Any) -> Any:
        self.calls += 1
        if data_from_muscle is None:
            self.nones += 1
        else:
            self.data.append(data_from_muscle)
        return self.calls if self.calls % self.every == 0 else None

    def store(self) -> None:
        BrainDumper.store_brain_dump(io.BytesIO(str(self.calls).encode()), self._dumpers)

    def load(self) -> None:
        dump = BrainDumper.load_brain_dump(self._dumpers)
        if dump is not None:
            text = dump.read().decode()
            self.calls = int(text) if text else 0


class NegatedSum(Objective):
    """The attacker's objective: minus the sum of the last rewards, times ``factor``."""

    def __init__(self, factor: float = 1.0):
        super().__init__({})
        self.factor = float(factor)

    def internal_reward(self, memory: Any, **kwargs: Any) -> float:
        rewards = memory.tail(1).rewards
        return -self.factor * float(np.nansum(rewards.to_numpy(dtype=float)))
