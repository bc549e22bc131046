"""A tiny environment for the curriculum tests (tests/training/test_curriculum.py): it records what
``set_environment_parameters`` gave it, and its reward is the parameter ``bonus``.

``LessonEnv``: one behavior ``Learner`` with ``n_agents`` agents that start and end their
episodes together, every ``episode_length`` steps. Each agent observes the bonus of its
episode and takes one continuous action, which changes nothing. The last step of an episode
pays ``bonus`` (0.0 unless set); the others pay 0. A bonus given to ``set_environment_parameters``
applies from the next episode on, as the built-in environments do (a reset starts one).

``events`` lists, in order, ``("params", step, params)`` for every ``set_environment_parameters``
call and ``("reset", step, None)`` for every reset, where ``step`` counts the env steps so far;
with ``log_path`` each event is also appended to that file as a JSON line (the way to see them
from a test when the env runs in a worker process, or was closed at the end of a run).
"""

from __future__ import annotations

import json
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
from ml_arl.envs.parameter_values import draw

BEHAVIOR = "Learner"


class LessonEnv(BaseEnv):
    def __init__(self, n_agents: int = 4, episode_length: int = 10, log_path: Optional[str] = None, seed: int = 0):
        self.n_agents = n_agents
        self.episode_length = episode_length
        self.log_path = log_path
        self.rng = np.random.default_rng(seed)
        self.spec = BehaviorSpec([vector_obs_spec(1)], ActionSpec(1, ()))
        self.ids = np.arange(n_agents, dtype=np.int32)
        self.events: list[tuple[str, int, Any]] = []
        self.pending: Any = 0.0  # the bonus of the next episode (a number or a sampler)
        self.bonus = 0.0  # this episode's
        self.t = 0
        self.steps = 0  # env steps since the start
        self.result = (DecisionSteps.empty(self.spec), TerminalSteps.empty(self.spec))

    def _record(self, kind: str, data: Any) -> None:
        self.events.append((kind, self.steps, data))
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps([kind, self.steps, data]) + "\n")

    def set_environment_parameters(self, params: dict[str, Any]) -> None:
        self._record("params", params)
        if "bonus" in params:
            self.pending = params["bonus"]

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({BEHAVIOR: self.spec})

    def _decisions(self, reward: float) -> DecisionSteps:
        obs = np.full((self.n_agents, 1), self.bonus, np.float32)
        zeros = np.zeros(self.n_agents, np.int32)
        return DecisionSteps([obs], np.full(self.n_agents, reward, np.float32), self.ids, None, zeros, np.zeros(self.n_agents, np.float32))

    def _new_episode(self) -> None:
        self.bonus = draw(self.pending, self.rng)
        self.t = 0

    def reset(self) -> None:
        self._record("reset", None)
        self._new_episode()
        self.result = (self._decisions(0.0), TerminalSteps.empty(self.spec))

    def step(self) -> None:
        self.steps += 1
        self.t += 1
        if self.t < self.episode_length:
            self.result = (self._decisions(0.0), TerminalSteps.empty(self.spec))
            return
        obs = np.full((self.n_agents, 1), self.bonus, np.float32)
        terminal = TerminalSteps(
            [obs], np.full(self.n_agents, self.bonus, np.float32), np.zeros(self.n_agents, bool), self.ids,
            np.zeros(self.n_agents, np.int32), np.zeros(self.n_agents, np.float32),
        )
        self._new_episode()
        self.result = (self._decisions(0.0), terminal)

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self.result

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        pass

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        pass

    def close(self) -> None:
        pass


def make_env(seed: int = 0, n_agents: int = 4, episode_length: int = 10, log_path: Optional[str] = None) -> LessonEnv:
    return LessonEnv(n_agents, episode_length, log_path, seed)
