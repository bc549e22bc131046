"""A goal-conditioned learning task (network_settings.goal_conditioning_type) in the manner of
``tests/support/simple_envs.GoalReach``: the same one-dimensional reach, rewards and success criterion,
but the goal comes as a GOAL_SIGNAL observation, one-hot over the two goals (-1 and +1), as
Unity's GridWorld shows its goal. The other observation (DEFAULT) is the episode's elapsed time,
``t * step_size``: it says nothing of which goal to reach."""

from __future__ import annotations

from typing import Optional

import numpy as np
from mlagents_envs.base_env import BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from tests.support.simple_envs import STEP_SIZE, GoalReach

GOAL_OBS = 1  # index of the goal-signal observation


class GoalSignalReach(GoalReach):
    def __init__(self, continuous: int = 1, discrete: int = 0, seed: int = 0):
        super().__init__(continuous, discrete, seed=seed)
        none = DimensionProperty.NONE
        self.spec = BehaviorSpec(
            [ObservationSpec((1,), (none,), ObservationType.DEFAULT, "time"),
             ObservationSpec((2,), (none,), ObservationType.GOAL_SIGNAL, "goal")],
            self.spec.action_spec,
        )
        self.reset()

    def _observe(self, goal: np.ndarray, t: Optional[np.ndarray] = None) -> list[np.ndarray]:
        elapsed = np.zeros((len(goal), 1), np.float32) if t is None else (t.reshape(-1, 1) * STEP_SIZE).astype(np.float32)
        one_hot = np.stack([goal < 0, goal > 0], axis=1).astype(np.float32)
        return [elapsed, one_hot]


def goal_signal_reach(seed: Optional[int] = None, continuous: int = 1, discrete: int = 0) -> GoalSignalReach:
    """The env factory for ``env_path: tests.support.goal_envs:goal_signal_reach``."""
    return GoalSignalReach(continuous, discrete, seed=seed or 0)
