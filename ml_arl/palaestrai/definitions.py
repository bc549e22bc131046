"""What a palaestrAI run file says about an environment and its agents, and building that
environment: the definitions the run-file reader (ml_arl.palaestrai.runfile), the environment
adapter (ml_arl.palaestrai.env) and the agents (ml_arl.palaestrai.agents) share. No torch here.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from ml_arl.core.exceptions import ConfigError
from ml_arl.core.import_path import ImportPathError, resolve
from ml_arl.palaestrai.loops import close_loop, run_awaited

PHASE_PARAMETER = "palaestrai_phase"  # environment_parameters key: which phase's environment runs


def import_problem(name: str) -> Optional[str]:
    """None when the class ``name`` (package.module:Class) imports; else one line saying why not."""
    try:
        resolve(name)
    except ImportPathError as err:
        return f"{name} does not import: {err}"
    return None


@dataclass(frozen=True)
class PluginSpec:
    """A palaestrAI ``{name: pkg.mod:Class, params: {...}}``."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    where: str = field(default="", compare=False)  # the run file and key that named it, for errors

    def build(self) -> Any:
        """An instance; ConfigError naming ``where`` when the class does not import (the run file's
        modules were only found when it was read: see ml_arl.palaestrai.run_sections.Reader)."""
        try:
            cls = resolve(self.name)
        except ImportPathError as err:
            raise ConfigError([f"{self.where or 'palaestrAI plugin'}: {self.name} does not import: {err}"]) from None
        return cls(**self.params)


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    uid: str
    params: dict[str, Any] = field(default_factory=dict)
    reward: Optional[PluginSpec] = None
    state_transformer: Optional[PluginSpec] = None
    where: str = field(default="", compare=False)  # the run file and key that named it, for errors


@dataclass(frozen=True)
class AgentWiring:
    """One agent: its behavior name, whitelists (full ``<env uid>.<id>`` ids) and objective."""

    name: str
    sensors: tuple[str, ...]
    actuators: tuple[str, ...]
    objective: Optional[PluginSpec] = None
    end_episode_at: Optional[tuple[int, float]] = None  # AgentObjectiveTerminationCondition brain_avgN: (N, X)


def closest(name: str, options: list[str]) -> str:
    import difflib

    near = difflib.get_close_matches(name, options, n=1, cutoff=0.0)
    return near[0] if near else (options[0] if options else "")


def wiring_problems(wiring: list[AgentWiring], sensors: list[str], actuators: list[str]) -> list[str]:
    """One line per sensor or actuator an agent lists that the environment does not offer."""
    problems = []
    for agent in wiring:
        for kind, listed, offered in (("sensor", agent.sensors, sensors), ("actuator", agent.actuators, actuators)):
            for uid in listed:
                if uid not in offered:
                    hint = f"; did you mean {closest(uid, offered)!r}?" if offered else "; it offers none"
                    problems.append(f"agent {agent.name!r}: the environment has no {kind} {uid!r}{hint}")
    return problems


def build_environment(spec: EnvironmentSpec, seed: int) -> Any:
    """The palaestrAI environment as its EnvironmentConductor builds it."""
    params = dict(spec.params)
    params.update(uid=spec.uid, broker_uri="ipc://*", seed=seed)
    env = PluginSpec(spec.name, params, spec.where).build()
    env._uid = spec.uid
    env._name = spec.uid
    if spec.reward is not None:
        env.reward = spec.reward.build()
    if spec.state_transformer is not None:
        env._state_transformer = spec.state_transformer.build()
    return env


def offered(spec: EnvironmentSpec, seed: int) -> tuple[list[Any], list[Any]]:
    """The SensorInformation and ActuatorInformation the environment offers at its start, with
    their ``<env uid>.`` ids."""
    env = build_environment(spec, seed)
    loop: list[Optional[asyncio.AbstractEventLoop]] = [None]
    try:
        baseline = run_awaited(loop, env.start_environment())
        sensors, actuators = (baseline[0], baseline[1]) if isinstance(baseline, tuple) else (
            baseline.sensors_available, baseline.actuators_available)
        sensors, actuators = copy.deepcopy(list(sensors)), copy.deepcopy(list(actuators))
        for info in sensors + actuators:
            info.uid = _with_prefix(info.uid, spec.uid)
        run_awaited(loop, env.shutdown())
        return sensors, actuators
    finally:
        close_loop(loop)  # what the environment left pending is cancelled and ends before the loop closes


def offered_ids(spec: EnvironmentSpec, seed: int) -> tuple[list[str], list[str]]:
    """The sensor and actuator ids (``<env uid>.<id>``) the environment offers at its start."""
    sensors, actuators = offered(spec, seed)
    return [s.uid for s in sensors], [a.uid for a in actuators]


def _with_prefix(uid: Any, env_uid: str) -> str:
    uid = str(uid)
    return uid if uid.startswith(f"{env_uid}.") else f"{env_uid}.{uid}"
