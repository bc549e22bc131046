"""PettingZoo environments for tests/envs/test_pettingzoo.py.

``Mixed``: a tiny parallel game with every supported space: ``runner_0`` and ``runner_1`` (Box
actions in [0, 2], reward = the first action component; ``runner_1`` terminates after 2 steps),
and ``cam_0`` (a uint8 8x8x3 image, MultiDiscrete (3, 2) actions, reward 1 per step); the
episode is truncated after 4 steps.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Mixed(ParallelEnv):
    metadata = {"name": "mixed_v0"}

    def __init__(self, early_step: int = 2, last_step: int = 4):
        self.possible_agents = ["runner_0", "runner_1", "cam_0"]
        self.early_step, self.last_step = early_step, last_step
        self.t = 0
        self.actions: list[dict[str, Any]] = []  # what step() received
        self.resets = 0

    def observation_space(self, agent: str) -> spaces.Space:
        if agent.startswith("cam"):
            return spaces.Box(0, 255, (8, 8, 3), np.uint8)
        return spaces.Box(-10.0, 10.0, (2, 1), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        if agent.startswith("cam"):
            return spaces.MultiDiscrete([3, 2])
        return spaces.Box(0.0, 2.0, (2,), np.float32)

    def _obs(self, agent: str) -> np.ndarray:
        if agent.startswith("cam"):
            return np.full((8, 8, 3), 51 * (self.t % 6), np.uint8)
        return np.array([[self.t], [int(agent[-1])]], np.float32)

    def reset(self, seed: Optional[int] = None, options: Any = None) -> tuple[dict, dict]:
        self.t = 0
        self.resets += 1
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.actions.append(actions)
        self.t += 1
        rewards = {a: (1.0 if a.startswith("cam") else float(actions[a][0])) for a in self.agents}
        terminated = {a: a == "runner_1" and self.t >= self.early_step for a in self.agents}
        truncated = {a: self.t >= self.last_step for a in self.agents}
        obs = {a: self._obs(a) for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, {a: {} for a in obs}
