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


class FlakyDummyEnvironment:
    """palaestrAI's DummyEnvironment whose life ``fail_life`` raises in its ``fail_at``-th update
    (lives counted in ``state_dir``/lives-<seed>; arl-learn starts no environment in its own
    process, so life 1 is the worker's first): a crashing environment."""

    def __new__(cls, uid: str, broker_uri: Any = None, seed: int = 0, fail_at: int = 5, state_dir: str = ".",
                fail_life: int = 1, **params: Any) -> Any:
        import os

        from palaestrai.environment.dummy_environment import DummyEnvironment

        counter = os.path.join(state_dir, f"lives-{seed}")
        life = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
        with open(counter, "w") as f:
            f.write(str(life))

        class _Flaky(DummyEnvironment):  # type: ignore[misc, valid-type]
            updates = 0

            def update(self, actuators: Any) -> Any:
                self.updates += 1
                if life == fail_life and self.updates == fail_at:
                    raise RuntimeError(f"flaky environment: life {life} fails at update {fail_at}")
                return super().update(actuators)

        return _Flaky(uid=uid, broker_uri=broker_uri, seed=seed, **params)


class OffsetFilter:
    """A palaestrAI filter (duck-typed: palaestrai.agent.Filter's hooks) that adds ``offset`` to every
    Discrete reading the muscle sees (wrapping within its space) and to every update the brain sends."""

    def __init__(self, offset: int = 1):
        self.offset = int(offset)
        self.brain: Any = None
        self.muscle: Any = None
        self.set_up = False

    def setup(self) -> None:
        self.set_up = True

    def muscle_pre_process(self, sensors: list[Any], actuators_available: list[Any]) -> tuple[list[Any], list[Any]]:
        import copy

        out = []
        for sensor in sensors:
            sensor = copy.copy(sensor)
            sensor._value = (int(np.asarray(sensor.value).reshape(-1)[0]) + self.offset) % int(sensor.space.n)
            out.append(sensor)
        return out, actuators_available

    def muscle_post_process(self, setpoints: list[Any], data_for_brain: Any) -> tuple[list[Any], Any]:
        return setpoints, data_for_brain

    def brain_pre_process(self, muscle_id: str, data_from_muscle: Any) -> tuple[str, Any]:
        return muscle_id, data_from_muscle

    def brain_post_process(self, potential_update: Any) -> Any:
        return None if potential_update is None else potential_update + self.offset
