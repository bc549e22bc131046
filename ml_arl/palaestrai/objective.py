"""A palaestrAI agent's objective, as ml_arl's objective pipeline sees it.

The palaestrAI ``Objective`` itself (``internal_reward(memory)``) runs in the adapter
(ml_arl.palaestrai.env), which holds the agent's palaestrAI ``Memory``. ``EnvironmentObjective`` is
the behavior's objective in our config: the worker binds it to its environment
(``bind(env, behavior)``, see ml_arl.acting.env_runner) and it hands the trajectory the
value the adapter computed, while the trajectory keeps the environment reward beside it (TensorBoard
and the store show both). No torch: this runs in the workers.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ml_arl.core.objectives import ObjectiveBatch


class EnvironmentObjective:
    """The objective value the palaestrAI environment adapter computed for the behavior."""

    def __init__(self) -> None:
        self._env: Optional[Any] = None
        self._behavior = ""

    def bind(self, env: Any, behavior: str) -> None:
        if not hasattr(env, "objective_of"):
            raise TypeError(
                f"behavior {behavior!r}: a palaestrAI objective needs a palaestrAI environment "
                f"(got {type(env).__name__})"
            )
        self._env, self._behavior = env, behavior

    def __call__(self, batch: ObjectiveBatch) -> np.ndarray:
        if self._env is None:
            raise RuntimeError("EnvironmentObjective used before the worker bound it to its environment")
        terminal = bool(np.any(batch.terminated) or np.any(batch.interrupted))
        value = self._env.objective_of(self._behavior, terminal)
        return np.full(batch.reward.shape[0], value, np.float32)
