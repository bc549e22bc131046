"""Driving one palaestrAI ``Environment`` as palaestrAI 3.5.18 drives it (ml_arl.palaestrai.env
turns it into a BaseEnv): built with its params plus ``uid``, ``broker_uri`` and ``seed``;
``start_environment()``; between episodes the environment's own ``reset()``, or ``shutdown()`` then
``start_environment()`` (palaestrAI's default); ``update(actuators)`` with the setpoints given, the
environment's uid removed from their ids; the state transformer applied; coroutine methods run on a
private event loop. Every id it hands back starts with ``<env uid>.``. What the environment
raises becomes a PalaestraiComponentError (restartable). No torch: this runs in the workers.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, Optional

import numpy as np

from ml_arl.core.exceptions import PalaestraiComponentError
from ml_arl.palaestrai.definitions import EnvironmentSpec, build_environment
from ml_arl.palaestrai.loops import close_loop, drain, run_awaited

logger = logging.getLogger(__name__)


def guarded(loop_holder: list[Optional[asyncio.AbstractEventLoop]], owner: Any, method: str, *args: Any) -> Any:
    """``owner.method(*args)``, awaited when it is a coroutine; what it raises becomes a
    PalaestraiComponentError (restartable, within the restart quotas), the original as its cause."""
    try:
        return run_awaited(loop_holder, getattr(owner, method)(*args))
    except PalaestraiComponentError:
        raise
    except Exception as err:
        raise PalaestraiComponentError(f"{type(owner).__name__}.{method}() raised {type(err).__name__}: {err}") from err


def snapshot(info: Any) -> Any:
    """A copy of a Sensor/ActuatorInformation that shares its space (palaestrAI deep-copies the
    space too, which costs most of a step here) but not its value."""
    out = copy.copy(info)
    value = getattr(out, "_value", None)
    if isinstance(value, np.ndarray):
        out._value = value.copy()
    return out


class EnvironmentDriver:
    """One palaestrAI environment of one worker; ``spec`` says which (a phase may change it)."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.loop: list[Optional[asyncio.AbstractEventLoop]] = [None]
        self.env: Any = None
        self.spec: Optional[EnvironmentSpec] = None

    def call(self, owner: Any, method: str, *args: Any) -> Any:
        return guarded(self.loop, owner, method, *args)

    def _prefixed(self, infos: Any) -> list[Any]:
        uid = self.spec.uid if self.spec is not None else ""
        out = []
        for info in infos or []:
            info = snapshot(info)  # the environment may change its own objects later (tic-tac-toe's board)
            if not str(info.uid).startswith(f"{uid}."):
                info.uid = f"{uid}.{info.uid}"
            out.append(info)
        return out

    def _baseline(self, baseline: Any) -> tuple[list[Any], list[Any]]:
        if isinstance(baseline, tuple):
            sensors, actuators = baseline[0], baseline[1]
        elif hasattr(baseline, "sensors_available"):
            sensors, actuators = baseline.sensors_available, baseline.actuators_available
        elif hasattr(baseline, "sensors"):  # an EnvironmentResetResponse from an environment's own reset()
            sensors, actuators = baseline.sensors, baseline.actuators
        else:
            raise TypeError(f"{type(self.env).__name__}.start_environment() returned {type(baseline).__name__}; "
                            "expected an EnvironmentBaseline")
        return self._prefixed(sensors), self._prefixed(actuators)

    def start(self, spec: EnvironmentSpec, phase: int) -> tuple[list[Any], list[Any]]:
        """A new episode: the (sensors, actuators) it starts with."""
        from palaestrai.environment import Environment

        if self.env is None or spec != self.spec:
            self.close()
            self.env, self.spec = build_environment(spec, self.seed), spec
            return self._baseline(self.call(self.env, "start_environment"))
        env = self.env
        env._tick, env._done = 0, False
        if type(env).reset is Environment.reset:  # palaestrAI's default reset, without its messages
            self.call(env, "shutdown")
            drain(self.loop)  # what the old episode's world left pending goes before the new one starts
            return self._baseline(self.call(env, "start_environment"))
        from palaestrai.core.protocol import EnvironmentResetRequest

        request = EnvironmentResetRequest("ml_arl", env.uid, "ml_arl", "ml_arl", phase)
        return self._baseline(self.call(env, "reset", request))

    def update(self, setpoints: list[Any]) -> tuple[list[Any], list[Any], bool, Optional[bool], Optional[bool]]:
        """Step the environment: (sensor readings, rewards, done, terminated, truncated)."""
        from palaestrai.environment import EnvironmentState

        uid = self.spec.uid if self.spec is not None else ""
        actuators = []
        for act in map(snapshot, setpoints):
            act.uid = str(act.uid)[len(uid) + 1:] if str(act.uid).startswith(f"{uid}.") else act.uid
            actuators.append(act)
        env = self.env
        env._tick = getattr(env, "_tick", 0) + 1
        state = self.call(env, "update", actuators)
        if isinstance(state, tuple):
            state = EnvironmentState(sensor_information=state[0], rewards=state[1], done=state[2])
        state.sensor_information = self._prefixed(state.sensor_information)
        transformer = getattr(env, "_state_transformer", None)
        if transformer is not None:
            state = transformer(state)
        terminated, truncated = getattr(state, "terminated", None), getattr(state, "truncated", None)
        done = bool(state.done or terminated or truncated)
        env._done = done
        return list(state.sensor_information), list(state.rewards or []), done, terminated, truncated

    def close(self) -> None:
        if self.env is not None:
            try:
                run_awaited(self.loop, self.env.shutdown())
                drain(self.loop)
            finally:
                self.env = None

    def close_loop(self) -> None:
        try:
            self.close()
        finally:
            close_loop(self.loop)


class DriverSet:
    """The environments of one phase in one worker, driven together as palaestrAI's
    SimulationController drives them: each starts at the episode's start, each is updated every
    step with the setpoints of its own actuators (none is a valid update), their readings and
    rewards are joined, and the episode ends when any of them is done (terminated when any is,
    else truncated when any is)."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.loop: list[Optional[asyncio.AbstractEventLoop]] = [None]
        self.drivers: dict[str, EnvironmentDriver] = {}

    def call(self, owner: Any, method: str, *args: Any) -> Any:
        return guarded(self.loop, owner, method, *args)

    def start(self, specs: tuple[EnvironmentSpec, ...], phase: int) -> tuple[list[Any], list[Any]]:
        for uid in [u for u in self.drivers if u not in {s.uid for s in specs}]:
            self.drivers.pop(uid).close()
        sensors: list[Any] = []
        actuators: list[Any] = []
        for index, spec in enumerate(specs):
            driver = self.drivers.get(spec.uid)
            if driver is None:
                driver = self.drivers[spec.uid] = EnvironmentDriver(self.seed + 7919 * index)
                driver.loop = self.loop
            s, a = driver.start(spec, phase)
            sensors += s
            actuators += a
        return sensors, actuators

    def update(self, setpoints: list[Any]) -> tuple[list[Any], list[Any], bool, Optional[bool], Optional[bool]]:
        sensors: list[Any] = []
        rewards: list[Any] = []
        done = False
        terminated: list[Optional[bool]] = []
        truncated: list[Optional[bool]] = []
        for uid, driver in self.drivers.items():
            own = [a for a in setpoints if str(a.uid).startswith(f"{uid}.")]
            s, r, d, term, trunc = driver.update(own)
            sensors += s
            rewards += r
            done = done or d
            terminated.append(term)
            truncated.append(trunc)
        if any(t is True for t in terminated):
            return sensors, rewards, True, True, False
        if any(t is True for t in truncated):
            return sensors, rewards, True, False, True
        seen = [t for t in terminated + truncated if t is not None]
        return sensors, rewards, done, (False if seen else None), (False if seen else None)

    def close_loop(self) -> None:
        try:
            for driver in self.drivers.values():
                driver.close()
        finally:
            self.drivers = {}
            close_loop(self.loop)
