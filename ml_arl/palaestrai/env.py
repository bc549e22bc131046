"""A palaestrAI ``Environment`` seen through mlagents_envs' BaseEnv, one behavior per agent.

palaestrAI's central modelling idea: the agents share one environment and each reads its own
whitelist of sensors and sets its own whitelist of actuators. Here each agent of the run file is
a behavior (its name) with one agent (id 0); its observation and actions are laid out by
ml_arl.palaestrai.spaces from its sensors and actuators, in the listed order.

The environment is driven as palaestrAI 3.5.18 drives it:

* built with its ``params`` plus ``uid``, ``broker_uri`` and ``seed``; its ``uid`` from the run
  file prefixes every sensor and actuator id (``<env uid>.<id>``); ``reward`` and
  ``state_transformer`` are loaded from the run file (an environment applies its ``reward``
  itself, as in palaestrAI; the state transformer is applied to each update's state);
* ``start_environment()`` at the start of each episode; ``update(actuators)`` with the setpoints of
  the agents that act (only the actuators the environment offers, its uid removed from theirs);
  ``reset()`` between episodes (an environment's own ``reset``, else ``shutdown()`` and
  ``start_environment()`` as palaestrAI's default); coroutine methods are run on a private loop;
* ``simulation: vanilla``: every agent acts on the same state each step, their setpoints applied
  in one update. ``taking_turns``: one agent acts per step, in run-file order from the first at
  each episode's start; an agent's transition runs from its action to its next turn, and its
  reward is that of the update its own action caused (palaestrAI's TakingTurns);
* an episode ends when the update says ``done`` (``truncated`` without ``terminated`` is an
  interrupted episode, so a trainer bootstraps; ``done`` alone is a terminal state), or, with
  ``AgentObjectiveTerminationCondition``'s ``brain_avgN: X``, once the mean of an agent's last N
  objective values reaches X.

The environment reward an agent sees is the sum of the update's rewards (every agent receives all
of them, as in palaestrAI); an agent's palaestrAI ``Objective`` is computed here, from a palaestrAI
``Memory`` that holds what a RolloutWorker's holds (the previous sensor readings and setpoints,
the rewards that followed, done/terminated/truncated, and the objective values), and reaches the
trainer through ``ml_arl.palaestrai.objective:EnvironmentObjective``. Runs in worker processes:
no torch.
"""

from __future__ import annotations

import copy
import logging
import pickle
from collections import deque
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    TerminalSteps,
)

from ml_arl.core.behavior_specs import vector_obs_spec
from ml_arl.core.exceptions import ConfigError
from ml_arl.palaestrai.definitions import (
    PHASE_PARAMETER,
    AgentWiring,
    wiring_problems,
)
from ml_arl.palaestrai.driver import DriverSet, snapshot
from ml_arl.palaestrai.spaces import ActionLayout, ObservationLayout

logger = logging.getLogger(__name__)


def _is_dummy_objective(objective: Any) -> bool:
    from palaestrai.agent.dummy_objective import DummyObjective

    return type(objective) is DummyObjective


class _Agent:
    """What the adapter keeps per agent between its decisions."""

    def __init__(self, wiring: AgentWiring):
        self.wiring = wiring
        self.objective = wiring.objective.build() if wiring.objective is not None else None
        self.memory: Any = None
        # palaestrAI's DummyObjective is sum(memory.tail(1).rewards): the first value of each reward of the
        # last row. Computed here without the Memory, whose tail() builds pandas frames (most of a step's cost)
        self.first_values_sum = wiring.objective is not None and _is_dummy_objective(self.objective)
        if self.objective is not None and not self.first_values_sum:
            from palaestrai.agent.memory import Memory

            self.memory = Memory()
        self.recent: deque[float] = deque(maxlen=wiring.end_episode_at[0] if wiring.end_episode_at else 1)
        self.acted = False  # has an action this episode whose transition is open
        self.readings: list[Any] = []  # the SensorInformation it decided on
        self.setpoints: list[Any] = []  # the ActuatorInformation it set
        self.rewards: list[Any] = []  # the RewardInformation of the update its action caused
        self.closed: Optional[tuple[float, float]] = None  # (reward, objective) of a transition closed early


class PalaestraiEnv(BaseEnv):
    def __init__(
        self,
        environments: list[Any],  # per phase: its EnvironmentSpecs (a tuple), or one EnvironmentSpec
        agents: list[AgentWiring],
        taking_turns: bool = False,
        seed: int = 0,
        worker_id: int = 0,
        phase_limits: Optional[list[tuple[Optional[int], int]]] = None,
        phase_agents: Optional[list[Optional[list[str]]]] = None,
    ):
        # per phase, its environments (a phase with one may give it alone)
        self._phase_envs = [tuple(e) if isinstance(e, (tuple, list)) else (e,) for e in environments]
        self._phase = 0
        # per phase (episodes per worker, workers): palaestrAI's worker runs exactly its episodes, and a
        # worker beyond the phase's count runs none; an idle worker steps nothing until the next phase
        self._limits = list(phase_limits or [])
        self._phase_agents = list(phase_agents or [])  # per phase, the agents that act (None: all)
        self._episodes = 0
        self._idle = False
        self._wiring = list(agents)
        self.taking_turns = taking_turns
        self._seed = int(seed)
        self._worker_id = worker_id
        self._driver = DriverSet(self._seed)
        self._readings: dict[str, Any] = {}
        self._obs_layout: dict[str, ObservationLayout] = {}
        self._act_layout: dict[str, ActionLayout] = {}
        self._actuator_proto: dict[str, Any] = {}
        self._agents = {w.name: _Agent(w) for w in self._wiring}
        self._watch_objectives = any(w.end_episode_at is not None for w in self._wiring)
        self._offered: Optional[bytes] = None  # behavior_extras(), pickled once
        self._fresh_phase: Optional[int] = None  # the phase of an episode just started, nothing stepped yet
        self._turn = 0
        self._actions: dict[str, Optional[ActionTuple]] = {}
        self._deciding: list[str] = []
        self._objectives: dict[str, float] = {}
        self._terminal_objectives: dict[str, float] = {}
        self._steps: dict[str, tuple[DecisionSteps, TerminalSteps]] = {}
        self._specs: dict[str, BehaviorSpec] = {}
        # palaestrAI's environments and muscles draw from numpy's and Python's global generators
        # (tic-tac-toe's opponent, space.sample()): seeded per worker, a run repeats with its seed
        import random

        np.random.seed(self._seed % 2**32)
        random.seed(self._seed)
        self._start_episode(first=True)

    # -- the layout, from the first start ----------------------------------------------------

    def _lay_out(self, sensors: list[Any], actuators: list[Any]) -> None:
        by_sensor = {s.uid: s for s in sensors}
        by_actuator = {a.uid: a for a in actuators}
        problems = wiring_problems(self._wiring, list(by_sensor), list(by_actuator))
        if problems:
            raise ConfigError(["; ".join(problems) + " (arl-learn RUN_FILE --check-wiring lists every such problem)"])
        for w in self._wiring:
            self._obs_layout[w.name] = ObservationLayout(w.sensors, [by_sensor[s].space for s in w.sensors])
            layout = self._act_layout[w.name] = ActionLayout(w.actuators, [by_actuator[a].space for a in w.actuators])
            self._specs[w.name] = BehaviorSpec(
                [vector_obs_spec(self._obs_layout[w.name].size)], ActionSpec(layout.continuous, tuple(layout.branches))
            )
        self._actuator_proto = by_actuator

    def sensor_and_actuator_ids(self) -> tuple[list[str], list[str]]:
        """The ids the environment offers (``<env uid>.<id>``), as of its last start."""
        return list(self._readings), list(self._actuator_proto)

    # -- episodes ----------------------------------------------------------------------------

    def _quota_reached(self) -> bool:
        if self._phase >= len(self._limits):
            return False
        episodes, workers = self._limits[self._phase]
        return self._worker_id >= workers or (episodes is not None and self._episodes >= episodes)

    def _start_episode(self, first: bool = False, terminal: Optional[dict[str, TerminalSteps]] = None) -> None:
        if not first and self._quota_reached():
            self._idle = True  # this worker's episodes of the phase are done: nothing decides until the next phase
            self._deciding = []
            for name, spec in self._specs.items():
                self._steps[name] = (DecisionSteps.empty(spec), (terminal or {}).get(name, TerminalSteps.empty(spec)))
            return
        self._idle = False
        spec = self._phase_envs[min(self._phase, len(self._phase_envs) - 1)]
        sensors, actuators = self._driver.start(spec, self._phase)
        if first or not self._specs:
            self._lay_out(sensors, actuators)
        self._readings = {s.uid: s for s in sensors}
        self._actuator_proto = {a.uid: a for a in actuators}
        for agent in self._agents.values():
            agent.acted = False
            agent.recent.clear()
        self._turn = 0
        self._emit(self._next_deciding(), terminal or {})
        self._fresh_phase = None if terminal else self._phase  # a start with an episode's end to hand on is not skipped

    def _next_deciding(self) -> list[str]:
        active = self._phase_agents[self._phase] if self._phase < len(self._phase_agents) else None
        names = [w.name for w in self._wiring if active is None or w.name in active]  # a phase may leave agents out
        return [names[self._turn % len(names)]] if self.taking_turns else names

    def _complete(self, agent: _Agent, done: bool, terminated: Optional[bool], truncated: Optional[bool]) -> float:
        """Close an agent's open transition: its objective (palaestrAI's RolloutWorker order)."""
        if agent.objective is None:
            value = _reward_sum(agent.rewards)
        elif agent.first_values_sum:
            value = float(sum(float(np.asarray(r.value, dtype=np.float64).reshape(-1)[0]) for r in agent.rewards))
        else:
            agent.memory.append(
                agent.wiring.name, sensor_readings=agent.readings, actuator_setpoints=agent.setpoints,
                rewards=agent.rewards, done=done, terminated=terminated, truncated=truncated,
            )
            out = self._driver.call(agent.objective, "internal_reward", agent.memory)
            value = 0.0 if out is None or np.size(out) == 0 else float(np.sum(out))
            agent.memory.append(agent.wiring.name, objective=np.array([value]))
        agent.recent.append(value)
        agent.acted = False
        return value

    def _emit(self, deciding: list[str], terminal: dict[str, TerminalSteps]) -> None:
        self._deciding = deciding
        self._actions = {}
        for w in self._wiring:
            name = w.name
            spec = self._specs[name]
            agent = self._agents[name]
            if name in deciding:
                reward = 0.0
                if agent.closed is not None:  # closed as the update came (brain_avgN)
                    reward, self._objectives[name] = agent.closed
                    agent.closed = None
                elif agent.acted:
                    reward = _reward_sum(agent.rewards)
                    self._objectives[name] = self._complete(agent, False, None, None)
                else:
                    self._objectives[name] = 0.0
                agent.readings = [self._readings[s] for s in w.sensors]
                obs = self._obs_layout[name].encode([r.value for r in agent.readings])[None]
                decision = DecisionSteps([obs], np.array([reward], np.float32), np.zeros(1, np.int32), None,
                                         np.zeros(1, np.int32), np.zeros(1, np.float32))
            else:
                decision = DecisionSteps.empty(spec)
            self._steps[name] = (decision, terminal.get(name, TerminalSteps.empty(spec)))

    def _end_episode(self, interrupted: bool, terminated: Optional[bool], truncated: Optional[bool]) -> None:
        terminal: dict[str, TerminalSteps] = {}
        for w in self._wiring:
            agent = self._agents[w.name]
            if agent.closed is not None:
                reward, self._objectives[w.name] = agent.closed
                agent.closed = None
            elif agent.acted:
                reward = _reward_sum(agent.rewards)
                self._objectives[w.name] = self._complete(agent, True, terminated, truncated)
            else:
                continue
            obs = self._obs_layout[w.name].encode([self._readings[s].value for s in w.sensors])[None]
            terminal[w.name] = TerminalSteps([obs], np.array([reward], np.float32), np.array([interrupted]),
                                             np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.float32))
        self._terminal_objectives = {name: self._objectives[name] for name in terminal}
        self._episodes += 1
        self._start_episode(terminal=terminal)

    # -- BaseEnv -----------------------------------------------------------------------------

    def behavior_extras(self) -> dict[str, bytes]:
        """Per agent, every sensor and actuator the environment offered at its first start (their
        spaces included), pickled: what a palaestrAI brain's trainer (ml_arl.palaestrai.agents)
        reads instead of starting the environment in the main process."""
        if self._offered is None:
            self._offered = pickle.dumps(
                ([snapshot(s) for s in self._readings.values()], [snapshot(a) for a in self._actuator_proto.values()])
            )
        return dict.fromkeys(self._agents, self._offered)

    @property
    def idle(self) -> bool:
        """This worker has run its episodes of the phase: its steps do nothing until the next
        phase, and are not counted as environment steps (ml_arl.acting.env_runner)."""
        return self._idle

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping(dict(self._specs))

    def reset(self) -> None:
        """A new episode; none when one of this phase has just started and nothing has stepped
        (the reset that follows the first start: a MIDAS world is not built twice)."""
        if self._fresh_phase == self._phase and not self._idle:
            return
        self._start_episode()

    def set_environment_parameters(self, params: Mapping[str, Any]) -> None:
        """``palaestrai_phase``: the phase whose environment runs from the next reset."""
        phase = params.get(PHASE_PARAMETER)
        if phase is None:
            return
        phase = int(phase)
        if phase != self._phase:
            self._episodes = 0
        # a phase whose environment differs gets it built at the next start (EnvironmentDriver.start)
        self._phase = phase

    def step(self) -> None:
        if self._idle:
            for name, spec in self._specs.items():
                self._steps[name] = (DecisionSteps.empty(spec), TerminalSteps.empty(spec))
            return
        self._fresh_phase = None
        setpoints = []
        for name in self._deciding:
            agent = self._agents[name]
            action = self._actions.get(name)
            if action is None:
                action = self._specs[name].action_spec.empty_action(1)
            values = self._act_layout[name].values(action.continuous[0], action.discrete[0])
            agent.setpoints = []
            for uid, value in zip(agent.wiring.actuators, values):
                act = copy.copy(self._actuator_proto[uid])
                act._value = value  # encoded from its own space by ActionLayout
                agent.setpoints.append(act)
            setpoints += agent.setpoints
        sensors, rewards, done, terminated, truncated = self._driver.update(setpoints)
        for s in sensors:
            self._readings[s.uid] = s
        for name in self._deciding:
            self._agents[name].rewards = rewards
            self._agents[name].acted = True
        if done:
            self._end_episode(bool(truncated and not terminated), terminated, truncated)
            return
        if self._watch_objectives and not self.taking_turns:
            # brain_avgN is judged on this update's objectives: close the transitions now (as the
            # next step would, done being known to be False) and end the episode with this update
            for name in self._deciding:
                agent = self._agents[name]
                agent.closed = (_reward_sum(agent.rewards), self._complete(agent, False, None, None))
        if self._objective_says_done():  # ends the episode as a terminal state, as palaestrAI's done does
            self._end_episode(False, None, None)
            return
        self._turn += 1
        self._emit(self._next_deciding(), {})

    def _objective_says_done(self) -> bool:
        """AgentObjectiveTerminationCondition's brain_avgN, on the objectives closed so far."""
        for agent in self._agents.values():
            limit = agent.wiring.end_episode_at
            if limit is not None and len(agent.recent) >= limit[0] and float(np.mean(agent.recent)) >= limit[1]:
                return True
        return False

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self._actions[behavior_name] = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self._actions[behavior_name] = action

    def objective_of(self, behavior: str, terminal: bool) -> float:
        """The objective value that came with the behavior's latest reward: of its last decision
        step, or (``terminal``) of its episode's end."""
        return (self._terminal_objectives if terminal else self._objectives).get(behavior, 0.0)

    def close(self) -> None:
        self._driver.close_loop()


def _reward_sum(rewards: list[Any]) -> float:
    total = 0.0
    for r in rewards:
        total += float(np.sum(np.asarray(r.value, dtype=np.float64)))
    return total
