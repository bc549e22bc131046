"""A second 1-D task for the imitation tests (issue 51), with other dynamics than GoalReach: the
action is a force, not a step. Each step the velocity becomes 0.6 x velocity + 0.1 x action
(the action clipped to [-1, 1]) and the position moves by the velocity; the observation is
(goal, position), the goal -1 or +1 drawn per episode. The episode ends once |position| >= 1,
with the reward SUCCESS_REWARD x sign(position) x goal; every other step costs 0.01, and an episode
is cut after 50 steps. Pushing with the goal at full force (+-1, the expert) arrives in 6 steps
(return 1.01); half force takes 10 (0.97), 0.3 of it 15 (0.92); the other way, -1.11.

Its demonstrations (tests/data/momentum_mlagents.demo) are written by ML-Agents' own writer,
``tests/data/make_mlagents_demos.py``, run in the ML-Agents reference venv.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorMapping,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)

NAME = "Momentum"
DECAY, FORCE = 0.6, 0.1
TIME_PENALTY = 0.01
SUCCESS_REWARD = 1.0 + 6 * TIME_PENALTY
MAX_STEPS = 50
NO_GROUP = (np.zeros(1, np.int32), np.zeros(1, np.float32))  # group id, group reward


class Momentum(BaseEnv):
    def __init__(self, seed: int = 0):
        self.spec = BehaviorSpec(
            [ObservationSpec((2,), (DimensionProperty.NONE,), ObservationType.DEFAULT, "goal_and_position")], ActionSpec(1, ())
        )
        self.rng = np.random.default_rng(seed)
        self.agent = 0
        self.goal, self.pos, self.vel, self.t = 1.0, 0.0, 0.0, 0
        self.action: Optional[ActionTuple] = None
        self.result = (DecisionSteps.empty(self.spec), TerminalSteps.empty(self.spec))

    @property
    def behavior_specs(self) -> BehaviorMapping:
        return BehaviorMapping({NAME: self.spec})

    def _obs(self) -> list[np.ndarray]:
        return [np.array([[self.goal, self.pos]], np.float32)]

    def _new_episode(self) -> DecisionSteps:
        self.agent += 1
        self.goal = float(self.rng.choice([-1.0, 1.0]))
        self.pos, self.vel, self.t = 0.0, 0.0, 0
        return DecisionSteps(self._obs(), np.zeros(1, np.float32), np.array([self.agent], np.int32), None, *NO_GROUP)

    def reset(self) -> None:
        self.result = (self._new_episode(), TerminalSteps.empty(self.spec))

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        self.action = action

    def set_action_for_agent(self, behavior_name: str, agent_id: int, action: ActionTuple) -> None:
        self.action = action

    def get_steps(self, behavior_name: str) -> tuple[DecisionSteps, TerminalSteps]:
        return self.result

    def step(self) -> None:
        force = float(np.clip(self.action.continuous[0, 0], -1.0, 1.0)) if self.action is not None else 0.0
        self.action = None
        self.vel = DECAY * self.vel + FORCE * force
        self.pos = float(np.clip(self.pos + self.vel, -1.0, 1.0))
        self.t += 1
        arrived, cut = abs(self.pos) >= 1.0, self.t >= MAX_STEPS
        if not (arrived or cut):
            self.result = (
                DecisionSteps(self._obs(), np.full(1, -TIME_PENALTY, np.float32), np.array([self.agent], np.int32), None, *NO_GROUP),
                TerminalSteps.empty(self.spec),
            )
            return
        reward = SUCCESS_REWARD * float(np.sign(self.pos)) * self.goal if arrived else -TIME_PENALTY
        terminal = TerminalSteps(self._obs(), np.array([reward], np.float32), np.array([not arrived]), np.array([self.agent], np.int32),
                                 *NO_GROUP)
        self.result = (self._new_episode(), terminal)

    def close(self) -> None:
        pass


def momentum(seed: Optional[int] = None) -> Momentum:
    """The env factory for ``env_path: tests.support.momentum_env:momentum``."""
    return Momentum(seed or 0)
